// URL parsing and request validation (MakeRequest): whatever a caller sends, either a
// precise INVALID_ARGUMENT or a request that is safe to write on the wire.
// Input: method, URL, then "name: value" header lines, separated by newlines.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "service/transport/http/request.h"

namespace {

void Check(bool condition) {
  if (!condition) std::abort();
}

bool IsToken(absl::string_view text) {
  if (text.empty()) return false;
  for (char c : text) {
    if (!absl::ascii_isalnum(c) && !absl::StrContains("!#$%&'*+-.^_`|~", c)) return false;
  }
  return true;
}

bool HasLineBreakOrNul(absl::string_view text) {
  return text.find_first_of(absl::string_view("\r\n\0", 3)) != absl::string_view::npos;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> lines = absl::StrSplit(input, absl::MaxSplits('\n', 16));
  lines.resize(std::max<size_t>(lines.size(), 2));
  egress::transport::HeaderList headers;
  for (size_t i = 2; i < lines.size(); ++i) {
    const size_t colon = lines[i].find(':');
    if (colon == std::string::npos) continue;
    headers.emplace_back(lines[i].substr(0, colon), lines[i].substr(colon + 1));
  }
  auto request = egress::transport::MakeRequest(lines[0], lines[1], headers, "body");
  if (!request.ok()) {
    Check(absl::IsInvalidArgument(request.status()));
    Check(!request.status().message().empty());
    return 0;
  }
  Check(IsToken(request->method));
  // Nothing Beast would throw on while writing it, nor what egress cannot carry.
  Check(!absl::EqualsIgnoreCase(request->method, "CONNECT"));
  Check(!absl::EqualsIgnoreCase(request->method, "TRACE") || request->body.empty());
  Check(!request->target.empty() && request->target[0] == '/');
  Check(absl::string_view(request->target).find_first_of(absl::string_view(" \r\n\0", 4)) ==
        absl::string_view::npos);
  Check(!request->origin.host.empty() && !HasLineBreakOrNul(request->origin.host));
  Check(request->origin.port > 0);
  for (const auto& [name, value] : request->headers) {
    Check(IsToken(name));
    Check(!HasLineBreakOrNul(value));
    Check(name.size() <= 65533 && value.size() <= 65533);
    Check(!absl::EqualsIgnoreCase(name, "upgrade"));
    Check(!absl::EqualsIgnoreCase(name, "host") && !absl::EqualsIgnoreCase(name, "content-length") &&
          !absl::EqualsIgnoreCase(name, "transfer-encoding"));
  }
  return 0;
}
