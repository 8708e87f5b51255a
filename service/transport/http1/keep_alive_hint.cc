#include "service/transport/http1/keep_alive_hint.h"

#include <algorithm>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace egress::transport {

std::optional<KeepAliveHint> ParseKeepAlive(absl::string_view value) {
  if (value.size() > kMaxKeepAliveHeaderBytes) return std::nullopt;
  KeepAliveHint hint;
  for (absl::string_view param : absl::StrSplit(value, ',')) {
    const size_t eq = param.find('=');
    if (eq == absl::string_view::npos) continue;
    const absl::string_view name = absl::StripAsciiWhitespace(param.substr(0, eq));
    absl::string_view number = absl::StripAsciiWhitespace(param.substr(eq + 1));
    if (number.size() >= 2 && number.front() == '"' && number.back() == '"') {
      number = number.substr(1, number.size() - 2);
    }
    // Digits only: SimpleAtoi would also take a sign or surrounding spaces.
    if (number.empty() || number.size() > 10 ||
        !std::all_of(number.begin(), number.end(), absl::ascii_isdigit)) {
      continue;
    }
    uint64_t n = 0;
    if (!absl::SimpleAtoi(number, &n)) continue;
    if (absl::EqualsIgnoreCase(name, "timeout")) {
      if (n <= kMaxKeepAliveTimeoutSeconds) hint.timeout = absl::Seconds(n);
    } else if (absl::EqualsIgnoreCase(name, "max")) {
      if (n <= UINT32_MAX) hint.max = static_cast<uint32_t>(n);
    }
  }
  if (!hint.timeout && !hint.max) return std::nullopt;
  return hint;
}

}  // namespace egress::transport
