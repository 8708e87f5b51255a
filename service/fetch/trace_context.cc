#include "service/fetch/trace_context.h"

#include <algorithm>
#include <cstdint>
#include <random>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace egress {
namespace {

bool IsLowerHex(absl::string_view text) {
  for (const char c : text) {
    if (!absl::ascii_isdigit(c) && !(c >= 'a' && c <= 'f')) return false;
  }
  return true;
}

bool AllZero(absl::string_view text) { return text.find_first_not_of('0') == text.npos; }

// `digits` random lower-case hex digits, not all zero.
std::string RandomHex(size_t digits) {
  thread_local std::mt19937_64 random((uint64_t{std::random_device{}()} << 32) |
                                      std::random_device{}());
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex(digits, '0');
  while (AllZero(hex)) {
    for (size_t i = 0; i < digits; i += 16) {
      uint64_t bits = random();
      for (size_t j = i; j < std::min(digits, i + 16); ++j, bits >>= 4) hex[j] = kHex[bits & 0xf];
    }
  }
  return hex;
}

// A tracestate egressd passes on: printable ASCII, at most the spec's 512 characters.
bool PlausibleTraceState(absl::string_view value) {
  if (value.size() > 512) return false;
  for (const char c : value) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

}  // namespace

std::optional<TraceParent> ParseTraceParent(absl::string_view value) {
  // version "-" trace-id "-" parent-id "-" flags: 2 + 1 + 32 + 1 + 16 + 1 + 2 = 55.
  constexpr size_t kLength = 55;
  if (value.size() < kLength || value[2] != '-' || value[35] != '-' || value[52] != '-') {
    return std::nullopt;
  }
  const absl::string_view version = value.substr(0, 2);
  const absl::string_view trace_id = value.substr(3, 32);
  const absl::string_view parent_id = value.substr(36, 16);
  const absl::string_view flags = value.substr(53, 2);
  if (!IsLowerHex(version) || version == "ff" || !IsLowerHex(trace_id) ||
      !IsLowerHex(parent_id) || !IsLowerHex(flags) || AllZero(trace_id) || AllZero(parent_id)) {
    return std::nullopt;
  }
  if (version == "00" ? value.size() != kLength
                      : value.size() > kLength && value[kLength] != '-') {
    return std::nullopt;
  }
  return TraceParent{std::string(trace_id), std::string(parent_id), std::string(flags)};
}

std::string TraceContext::ToTraceParent() const {
  return absl::StrCat("00-", trace_id, "-", span_id, "-", flags);
}

TraceContext ChildSpan(absl::string_view traceparent, absl::string_view tracestate) {
  TraceContext span;
  span.span_id = RandomHex(16);
  if (const auto parent = ParseTraceParent(traceparent)) {
    span.trace_id = parent->trace_id;
    span.parent_id = parent->parent_id;
    // Only the sampled bit is defined in version 00; the others are not passed on.
    const char low = parent->flags[1];
    const int low_bits = absl::ascii_isdigit(low) ? low - '0' : low - 'a' + 10;
    span.flags = low_bits % 2 == 1 ? "01" : "00";
    if (PlausibleTraceState(tracestate)) span.tracestate = std::string(tracestate);
  } else {
    span.trace_id = RandomHex(32);
    span.flags = "01";
  }
  return span;
}

}  // namespace egress
