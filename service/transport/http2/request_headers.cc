#include "service/transport/http2/request_headers.h"

#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"

namespace egress::transport::http2 {
namespace {

// Fields that describe one HTTP/1.1 connection; an HTTP/2 message carrying one is
// malformed (RFC 9113 8.2.2). Upgrade is refused by MakeRequest already.
constexpr std::array<absl::string_view, 5> kConnectionSpecific = {
    "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"};

// The options every Connection field names, lower-case: fields of that name belong to
// the HTTP/1.1 connection too.
// A set: a caller may name thousands, and every field is looked up.
absl::flat_hash_set<std::string> ConnectionOptions(const HeaderList& headers) {
  absl::flat_hash_set<std::string> options;
  for (const auto& [name, value] : headers) {
    if (!absl::EqualsIgnoreCase(name, "connection")) continue;
    for (absl::string_view option : absl::StrSplit(value, ',', absl::SkipWhitespace())) {
      options.insert(absl::AsciiStrToLower(absl::StripAsciiWhitespace(option)));
    }
  }
  return options;
}

}  // namespace

absl::StatusOr<HeaderList> RequestHeaderBlock(const HttpRequest& request) {
  if (absl::Status valid = ValidateForWire(request); !valid.ok()) return valid;
  HeaderList block;
  block.reserve(request.headers.size() + 5);
  block.emplace_back(":method", request.method);
  block.emplace_back(":scheme", request.origin.tls ? "https" : "http");
  block.emplace_back(":authority", request.origin.HostHeader());
  block.emplace_back(":path", request.target);
  const absl::flat_hash_set<std::string> connection_options = ConnectionOptions(request.headers);
  for (const auto& [name, value] : request.headers) {
    std::string lower = absl::AsciiStrToLower(name);
    const absl::string_view trimmed = TrimSpacesAndTabs(value);
    const bool connection_specific =
        std::find(kConnectionSpecific.begin(), kConnectionSpecific.end(), lower) !=
            kConnectionSpecific.end() ||
        connection_options.contains(lower) ||
        (lower == "te" && !absl::EqualsIgnoreCase(trimmed, "trailers"));
    if (connection_specific) continue;
    block.emplace_back(std::move(lower), std::string(trimmed));
  }
  if (HasContentLength(request)) {
    block.emplace_back("content-length", std::to_string(request.body.size()));
  }
  return block;
}

}  // namespace egress::transport::http2
