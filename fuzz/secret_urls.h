// URL shapes with a secret in them, and the rule for what the access log must not show
// of them, for the fuzzers that check the log's redaction (url_redaction_fuzzer,
// access_log_fuzzer).
#ifndef EGRESS_FUZZ_SECRET_URLS_H_
#define EGRESS_FUZZ_SECRET_URLS_H_

#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace egress::fuzz {

// The secret. Nothing else in a generated URL holds a 'z' or a 'Z', so that wherever
// the marker shows (a host is lower-cased), it came from a secret.
inline constexpr char kSecret[] = "ZZZ";
inline constexpr size_t kSecretBytes = sizeof(kSecret) - 1;

inline bool ShowsSecret(absl::string_view text) {
  return absl::StrContains(absl::AsciiStrToLower(text), "zzz");
}

// Whether the access log must not show what is at `at` in `url`: the rule its redaction
// keeps (AccessLog::LoggedUrl), stated on the text alone, whether or not it parses.
//   - Past the first '?' or '#' (past the first '#' only when the query is kept): a
//     query or a fragment, as every reading has it.
//   - Userinfo: after the scheme's "://" (or from the start when the URL does not begin
//     with a scheme and "://") with no '/' in between, and followed by an '@' with no
//     '/' in between. A '/' ends the authority in every URL grammar: "http://u/p@h/" is
//     host u, path /p@h/.
inline bool SecretAt(absl::string_view url, size_t at, bool keep_query) {
  if (url.find_first_of(keep_query ? "#" : "?#") < at) return true;
  size_t scheme = 0;  // RFC 3986: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )
  while (scheme < url.size() &&
         (absl::ascii_isalnum(static_cast<unsigned char>(url[scheme])) ||
          absl::string_view("+-.").find(url[scheme]) != absl::string_view::npos)) {
    ++scheme;
  }
  const bool has_scheme = scheme > 0 && absl::ascii_isalpha(static_cast<unsigned char>(url[0])) &&
                          url.substr(scheme, 3) == "://";
  const size_t from = has_scheme && scheme < at ? scheme + 3 : 0;
  if (url.substr(from, at - from).find('/') != absl::string_view::npos) return false;
  const size_t after = url.find_first_of("/@", at);
  return after != absl::string_view::npos && url[after] == '@';
}

// What a URL may be made of.
struct UrlShape {
  // Hosts to pick from; any bytes when empty.
  std::vector<std::string> hosts;
  // Ports to pick from (also any digits, or none, when empty).
  std::vector<int> ports;
  // ASCII only (proto3 strings must be UTF-8); else any byte.
  bool ascii = false;
  // Bytes left out of userinfo besides 'z', 'Z' and '/' (whose userinfo is no userinfo
  // to any parser).
  absl::string_view not_in_userinfo;
  // Userinfo only after "scheme://" (a Location: a relative reference's "u@h" is a path
  // once resolved).
  bool userinfo_needs_scheme = false;
  // Paths to pick from, any bytes after them; any bytes when empty.
  std::vector<std::string> paths;
};

// Up to `max` bytes of the input, without `excluded`, 'z' or 'Z'.
inline std::string Piece(FuzzedDataProvider& in, size_t max, const UrlShape& shape,
                         absl::string_view excluded = "") {
  std::string piece = in.ConsumeRandomLengthString(max);
  std::string kept;
  for (char c : piece) {
    if (shape.ascii) c &= 0x7f;
    if (c == 'z' || c == 'Z' || excluded.find(c) != absl::string_view::npos) continue;
    kept.push_back(c);
  }
  return kept;
}

// `piece` with the secret somewhere in it.
inline std::string WithSecret(FuzzedDataProvider& in, std::string piece) {
  piece.insert(in.ConsumeIntegralInRange<size_t>(0, piece.size()), kSecret);
  return piece;
}

// A URL from the input: scheme, separator, userinfo, host, port, path, query and
// fragment, each picked or made of the input's bytes, or left out; the secret in
// userinfo, query or fragment. A secret that the pieces around it put where SecretAt
// says it is no secret (in a path, a host) is replaced by "yyy": every "ZZZ" left is one
// the log must hide.
inline std::string SecretUrl(FuzzedDataProvider& in, const UrlShape& shape, bool keep_query) {
  static const char* const kSchemes[] = {"http", "https", "HTTP", "ftp", "h", ""};
  static const char* const kSeparators[] = {"://", "://", "://", ":", ":/", "//", "", ":///"};
  std::string url = in.ConsumeBool() ? kSchemes[in.ConsumeIntegralInRange<size_t>(0, 5)]
                                     : Piece(in, 8, shape);
  url += kSeparators[in.ConsumeIntegralInRange<size_t>(0, std::size(kSeparators) - 1)];
  const bool scheme = absl::StartsWith(url, "http://") || absl::StartsWith(url, "https://");
  if ((scheme || !shape.userinfo_needs_scheme) && in.ConsumeBool()) {
    const std::string excluded = absl::StrCat("/", shape.not_in_userinfo);
    std::string userinfo = Piece(in, 16, shape, excluded);
    if (in.ConsumeBool()) userinfo = WithSecret(in, userinfo);
    if (in.ConsumeBool()) absl::StrAppend(&userinfo, ":", WithSecret(in, Piece(in, 16, shape, excluded)));
    absl::StrAppend(&url, userinfo, "@");
  }
  if (!shape.hosts.empty()) {
    url += shape.hosts[in.ConsumeIntegralInRange<size_t>(0, shape.hosts.size() - 1)];
  } else {
    url += Piece(in, 16, shape);
  }
  if (!shape.ports.empty()) {
    absl::StrAppend(&url, ":", shape.ports[in.ConsumeIntegralInRange<size_t>(0, shape.ports.size() - 1)]);
  } else if (in.ConsumeBool()) {
    absl::StrAppend(&url, ":", Piece(in, 6, shape));
  }
  if (!shape.paths.empty()) {
    url += shape.paths[in.ConsumeIntegralInRange<size_t>(0, shape.paths.size() - 1)];
  }
  url += Piece(in, 24, shape);  // the path: any bytes, a '?', '#' or '@' too
  if (in.ConsumeBool()) absl::StrAppend(&url, "?", WithSecret(in, Piece(in, 24, shape)));
  if (in.ConsumeBool()) absl::StrAppend(&url, "#", WithSecret(in, Piece(in, 16, shape)));
  for (size_t at = url.find(kSecret); at != std::string::npos; at = url.find(kSecret, at + 1)) {
    if (!SecretAt(url, at, keep_query)) url.replace(at, kSecretBytes, "yyy");
  }
  return url;
}

}  // namespace egress::fuzz

#endif  // EGRESS_FUZZ_SECRET_URLS_H_
