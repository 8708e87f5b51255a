#include "service/transport/http/request.h"

#include <algorithm>
#include <array>
#include <optional>
#include <string_view>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "boost/url/parse.hpp"
#include "boost/url/url_view.hpp"
#include "service/base/error_reason.h"
#include "service/base/host_port.h"
#include "service/transport/policy/address_policy.h"

namespace egress::transport {
namespace {

// RFC 9110 5.6.2: token characters.
bool IsTokenChar(char c) {
  static constexpr absl::string_view kExtra = "!#$%&'*+-.^_`|~";
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) ||
         kExtra.find(c) != absl::string_view::npos;
}

bool IsToken(absl::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), IsTokenChar);
}

// Describes a byte for an error message: printable as itself, the rest as hex.
std::string DescribeByte(char c) {
  if (c == '\r') return "CR";
  if (c == '\n') return "LF";
  if (c == '\0') return "NUL";
  return absl::StrFormat("0x%02x", static_cast<unsigned char>(c));
}

// Beast's header fields hold at most 65535 bytes with their CRLF; a longer one would
// throw while the request is being written. The request target gets the same bound: no
// server takes more (nginx 8 KiB, Envoy 60 KiB for all headers), and an unbounded one is
// a caller choosing how much egress writes.
constexpr size_t kMaxFieldBytes = 65533;
// The longest method sent: the registered ones are at most 17 bytes
// (UPDATEREDIRECTREF); a longer token is a mistake or a caller filling the request line.
constexpr size_t kMaxMethodBytes = 64;
// A DNS name has at most 253 characters (RFC 1035); no host is longer.
constexpr size_t kMaxHostBytes = 253;

// RFC 9110 5.5: field values are visible characters, spaces and tabs (and obs-text).
// CR and LF would let a caller smuggle extra headers or a second request.
absl::Status ValidateHeader(const std::string& name, const std::string& value) {
  if (!IsToken(name)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "header name ", Quoted(name),
        " is not a valid HTTP token (letters, digits and !#$%&'*+-.^_`|~ only)"));
  }
  for (char c : value) {
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\t') || u == 0x7f) {
      return absl::InvalidArgumentError(
          absl::StrCat("header ", Quoted(name), " has a forbidden character (",
                       DescribeByte(c), ") in its value; CR, LF, NUL and other control "
                       "characters are not allowed"));
    }
  }
  if (name.size() > kMaxFieldBytes || value.size() > kMaxFieldBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "header \"", name.substr(0, 64), name.size() > 64 ? "..." : "", "\" is ",
        std::max(name.size(), value.size()), " bytes long; a header name or value may have at "
        "most ", kMaxFieldBytes));
  }
  // The transport writes these itself from the URL and the body.
  static constexpr std::array<absl::string_view, 3> kReserved = {
      "host", "content-length", "transfer-encoding"};
  for (absl::string_view reserved : kReserved) {
    if (absl::EqualsIgnoreCase(name, reserved)) {
      return absl::InvalidArgumentError(
          absl::StrCat("header \"", name, "\" is set by egress from the URL and body; "
                       "leave it out of the request"));
    }
  }
  return absl::OkStatus();
}

// Whether a header is Connection and names `option` among its comma-separated ones.
bool IsConnectionWith(const std::string& name, const std::string& value,
                      absl::string_view option) {
  if (!absl::EqualsIgnoreCase(name, "connection")) return false;
  for (absl::string_view each : absl::StrSplit(value, ',')) {
    if (absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(each), option)) return true;
  }
  return false;
}

// What egress cannot carry as asked: a tunnel, a switch to another protocol, or a body
// where HTTP forbids one. Checked before anything is sent (or a connection picked).
absl::Status ValidateMethodAndFraming(const std::string& method, const HeaderList& headers,
                                      const RequestBody& body) {
  if (absl::EqualsIgnoreCase(method, "CONNECT")) {
    return absl::InvalidArgumentError(
        "method CONNECT asks for a tunnel, which egress does not open; fetch the URL "
        "itself with GET, POST, ...");
  }
  if (absl::EqualsIgnoreCase(method, "TRACE") && !body.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "method TRACE must not have a body (RFC 9110 9.3.8), and this one has ", body.size(),
        " bytes; send it without one"));
  }
  for (const auto& [name, value] : headers) {
    if (absl::EqualsIgnoreCase(name, "upgrade") || IsConnectionWith(name, value, "upgrade")) {
      // The name only: a value may be a secret, and messages reach the access log.
      return absl::InvalidArgumentError(absl::StrCat(
          "header ", Quoted(name), " asks to switch protocols (upgrade), which egress does "
          "not do (it carries HTTP/1.1 requests and responses only); leave it out"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Origin> ParseOrigin(const boost::urls::url_view& url, absl::string_view raw) {
  Origin origin;
  const std::string scheme = absl::AsciiStrToLower(std::string(url.scheme()));
  if (scheme == "https") {
    origin.tls = true;
  } else if (scheme != "http") {
    return UrlError(absl::StatusCode::kInvalidArgument, "URL ", raw,
                    " has a scheme other than http or https; only http and https are supported");
  }
  if (url.host_type() == boost::urls::host_type::ipv6) {
    origin.host = url.host_ipv6_address().to_string();
  } else {
    origin.host = absl::AsciiStrToLower(std::string(url.encoded_host()));
  }
  if (origin.host.empty()) {
    return UrlError(absl::StatusCode::kInvalidArgument, "URL ", raw, " has no host");
  }
  // An address in any spelling ("127.1", "0x7f000001") becomes its one text, so that
  // the rules, the pool and the dial all meet the address; a host of that shape that is
  // no address ("1.2.3.999") is refused, as WHATWG URL parsers refuse it, and is never
  // sent to DNS as a name.
  if (LooksLikeAnAddress(origin.host)) {
    const std::optional<boost::asio::ip::address> address = HostAddress(origin.host);
    if (!address) {
      // The host is not quoted apart: what a parser reads as the host may be a secret
      // the caller meant as userinfo, and only the quoted URL is redacted in the log.
      return UrlError(absl::StatusCode::kInvalidArgument, "URL ", raw,
                      " has a host that is neither an IP address nor a name (no name's "
                      "last label starts with a digit)");
    }
    origin.host = AddressText(*address);
  }
  if (origin.host.size() > kMaxHostBytes) {
    return UrlError(absl::StatusCode::kInvalidArgument, "URL ", raw,
                    absl::StrCat(" has a host of ", origin.host.size(),
                                 " bytes; a host name has at most ", kMaxHostBytes));
  }
  if (url.has_port()) {
    // port_number() wraps numbers over 65535, so the digits are read here.
    const std::string digits(url.port());
    uint32_t port = 0;
    if (!absl::SimpleAtoi(digits, &port) || port == 0 || port > 65535) {
      return UrlError(absl::StatusCode::kInvalidArgument, "URL ", raw,
                      " has an invalid port (a port is a number from 1 to 65535)");
    }
    origin.port = static_cast<uint16_t>(port);
  } else {
    origin.port = origin.tls ? 443 : 80;
  }
  return origin;
}

// Visible ASCII only: no space, control character or byte past 0x7e.
bool IsPrintableWithoutSpaces(absl::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u > 0x20 && u < 0x7f;
  });
}

// A request target as MakeRequest makes it: origin-form, printable ASCII only.
absl::Status ValidateTarget(const std::string& target) {
  if (target.empty() || target[0] != '/' || !IsPrintableWithoutSpaces(target) ||
      target.size() > kMaxFieldBytes) {
    // Not quoted: its query may hold a secret, and callers wrap this message in their
    // own (without UrlError's payload).
    return absl::InvalidArgumentError(absl::StrCat(
        "the request target (", target.size(), " bytes) is not an origin-form path and "
        "query of at most ", kMaxFieldBytes, " printable characters"));
  }
  return absl::OkStatus();
}

}  // namespace

std::string Origin::Key() const {
  std::string key = tls ? "https://" : "http://";
  AppendHostPort(&key, host, port);
  return key;
}

std::string Origin::HostHeader() const {
  std::string header;
  if (port == (tls ? 443 : 80)) {
    AppendUrlHost(&header, host);
  } else {
    AppendHostPort(&header, host, port);
  }
  return header;
}

bool HttpRequest::IsIdempotent() const {
  static constexpr std::array<absl::string_view, 6> kIdempotent = {
      "GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"};
  return std::find(kIdempotent.begin(), kIdempotent.end(), method) != kIdempotent.end();
}

absl::StatusOr<HttpRequest> MakeRequest(absl::string_view method, absl::string_view url,
                                        HeaderList headers, RequestBody body) {
  HttpRequest request;
  if (method.size() > kMaxMethodBytes) {
    return WithReason(absl::InvalidArgumentError(absl::StrCat(
                          "method ", Quoted(method), " is longer than the ", kMaxMethodBytes,
                          " bytes egress sends")),
                      "INVALID_METHOD");
  }
  request.method = method.empty() ? "GET" : std::string(method);
  if (!IsToken(request.method)) {
    return WithReason(absl::InvalidArgumentError(absl::StrCat(
                          "method ", Quoted(request.method),
                          " is not a valid HTTP method token")),
                      "INVALID_METHOD");
  }

  auto parsed = boost::urls::parse_uri(std::string_view(url.data(), url.size()));
  if (!parsed) {
    return WithReason(UrlError(absl::StatusCode::kInvalidArgument, "URL ", url,
                               absl::StrCat(" is not a valid absolute URL (",
                                            parsed.error().message(),
                                            "); expected http(s)://host[:port]/path")),
                      "INVALID_URL");
  }
  auto origin = ParseOrigin(*parsed, url);
  if (!origin.ok()) return WithReason(origin.status(), "INVALID_URL");
  request.origin = *std::move(origin);

  // Userinfo and fragment are never sent upstream.
  request.target = std::string(parsed->encoded_path());
  if (request.target.empty()) request.target = "/";
  if (request.target[0] != '/') {  // "http://host:8x/" parses as port 8, path "x/"
    return WithReason(UrlError(absl::StatusCode::kInvalidArgument, "URL ", url,
                               " is not a valid absolute URL: its path must start with \"/\" "
                               "(is the port all digits?)"),
                      "INVALID_URL");
  }
  if (parsed->has_query()) absl::StrAppend(&request.target, "?", std::string(parsed->encoded_query()));
  if (request.target.size() > kMaxFieldBytes) {
    return WithReason(absl::InvalidArgumentError(absl::StrCat(
                          "the URL's path and query are ", request.target.size(),
                          " bytes; egress sends at most ", kMaxFieldBytes)),
                      "INVALID_URL");
  }

  for (const auto& [name, value] : headers) {
    if (auto status = ValidateHeader(name, value); !status.ok()) {
      return WithReason(status, "INVALID_HEADER");
    }
  }
  if (auto status = ValidateMethodAndFraming(request.method, headers, body); !status.ok()) {
    return WithReason(status, "UNSUPPORTED_REQUEST");
  }
  request.headers = std::move(headers);
  request.body = std::move(body);
  return request;
}

absl::string_view TrimSpacesAndTabs(absl::string_view value) {
  const size_t first = value.find_first_not_of(" \t");
  if (first == absl::string_view::npos) return {};
  return value.substr(first, value.find_last_not_of(" \t") - first + 1);
}

absl::Status ValidateForWire(const HttpRequest& request) {
  absl::Status valid = IsToken(request.method)
                           ? ValidateTarget(request.target)
                           : absl::InvalidArgumentError(absl::StrCat(
                                 "method ", Quoted(request.method), " is not a valid token"));
  for (const auto& [name, value] : request.headers) {
    if (valid.ok()) valid = ValidateHeader(name, value);
  }
  if (valid.ok()) valid = ValidateMethodAndFraming(request.method, request.headers, request.body);
  const std::string host = request.origin.HostHeader();
  if (valid.ok() && !IsPrintableWithoutSpaces(host)) {
    valid = absl::InvalidArgumentError(
        absl::StrCat("host ", Quoted(host), " has a space or a control character"));
  }
  return valid;
}

absl::StatusOr<std::string> SerializeRequestHead(const HttpRequest& request) {
  if (absl::Status valid = ValidateForWire(request); !valid.ok()) return valid;
  const std::string host = request.origin.HostHeader();
  size_t size = request.method.size() + request.target.size() + host.size() + 64;
  for (const auto& [name, value] : request.headers) size += name.size() + value.size() + 4;
  std::string wire;
  wire.reserve(size);
  absl::StrAppend(&wire, request.method, " ", request.target, " HTTP/1.1\r\nHost: ", host,
                  "\r\n");
  for (const auto& [name, value] : request.headers) {
    absl::StrAppend(&wire, name, ": ", TrimSpacesAndTabs(value), "\r\n");
  }
  if (HasContentLength(request)) {
    absl::StrAppend(&wire, "Content-Length: ", request.body.size(), "\r\n");
  }
  wire.append("\r\n");
  return wire;
}

bool HasContentLength(const HttpRequest& request) {
  return !request.body.empty() || request.method == "POST" || request.method == "PUT" ||
         request.method == "OPTIONS";
}

bool KeepsAlive(const HttpRequest& request) {
  return std::none_of(request.headers.begin(), request.headers.end(), [](const auto& header) {
    return IsConnectionWith(header.first, header.second, "close");
  });
}

}  // namespace egress::transport
