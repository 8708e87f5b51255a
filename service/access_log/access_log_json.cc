#include "service/access_log/access_log_json.h"

#include <cstdint>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "google/protobuf/duration.pb.h"
#include "google/protobuf/timestamp.pb.h"
#include "service/fetch/utf8_text.h"

namespace egress {
namespace {

// The line is written through a pointer into room made for its worst case once
// (LineBound), not appended a piece at a time: each std::string append costs a call, a
// capacity check and a copy, and a line is some ninety pieces.

char* Put(absl::string_view text, char* out) {
  std::memcpy(out, text.data(), text.size());
  return out + text.size();
}

// A JSON string: at most six bytes for each of `text`'s ("\u0001"; a byte that is not
// UTF-8 becomes "\\xNN", five) and the quotes. Most are printable ASCII and are copied
// whole after one look at each byte; the rest are escaped, and bytes that are not UTF-8
// written as \xNN first (a JSON parser may refuse invalid UTF-8, e.g. a caller's identity
// from binary metadata).
char* PutString(absl::string_view text, char* out) {
  *out++ = '"';
  bool plain = true;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte >= 0x80 || c == '"' || c == '\\') {
      plain = false;
      break;
    }
  }
  if (plain) {
    out = Put(text, out);
    *out++ = '"';
    return out;
  }
  std::string escaped;
  if (!IsUtf8(text)) text = escaped = EscapeNonUtf8(text);
  for (const char c : text) {
    switch (c) {
      case '"': out = Put("\\\"", out); break;
      case '\\': out = Put("\\\\", out); break;
      case '\n': out = Put("\\n", out); break;
      case '\r': out = Put("\\r", out); break;
      case '\t': out = Put("\\t", out); break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          constexpr char kHex[] = "0123456789abcdef";
          out = Put("\\u00", out);
          *out++ = kHex[static_cast<unsigned char>(c) >> 4];
          *out++ = kHex[c & 0xf];
        } else {
          *out++ = c;
        }
    }
  }
  *out++ = '"';
  return out;
}

// `"name":`, with the comma before it unless it opens its object.
char* PutName(absl::string_view name, char* out) {
  if (out[-1] != '{') *out++ = ',';
  *out++ = '"';
  out = Put(name, out);
  *out++ = '"';
  *out++ = ':';
  return out;
}

// FastIntToBuffer writes a terminating NUL after the digits, which the next piece
// overwrites (the bound leaves room for it).
template <class Integer>
char* PutInteger(Integer value, char* out) {
  return absl::numbers_internal::FastIntToBuffer(value, out);
}

char* PutField(absl::string_view name, absl::string_view value, char* out) {
  return PutString(value, PutName(name, out));
}

char* PutField(absl::string_view name, int32_t value, char* out) {
  return PutInteger(value, PutName(name, out));
}

char* PutField(absl::string_view name, uint32_t value, char* out) {
  return PutInteger(value, PutName(name, out));
}

// 64-bit integers are JSON strings in the mapping (a double cannot hold them all).
char* PutField(absl::string_view name, uint64_t value, char* out) {
  out = PutName(name, out);
  *out++ = '"';
  out = PutInteger(value, out);
  *out++ = '"';
  return out;
}

char* PutField(absl::string_view name, bool value, char* out) {
  return Put(value ? "true" : "false", PutName(name, out));
}

// Nanoseconds after the point as the JSON mapping writes them: 0, 3, 6 or 9 digits, as
// few as hold them.
char* PutFraction(int32_t nanos, char* out) {
  if (nanos == 0) return out;
  int digits = 9;
  for (; digits > 3 && nanos % 1000 == 0; digits -= 3) nanos /= 1000;
  *out = '.';
  for (int i = digits; i > 0; --i, nanos /= 10) out[i] = static_cast<char>('0' + nanos % 10);
  return out + digits + 1;
}

// A message field that is not set is left out, as MessageToJsonString does.
char* PutField(absl::string_view name, bool has, const google::protobuf::Duration& d,
               char* out) {
  if (!has) return out;
  out = PutName(name, out);
  const bool negative = d.seconds() < 0 || d.nanos() < 0;
  out = Put(negative ? "\"-" : "\"", out);
  out = PutInteger(negative ? -d.seconds() : d.seconds(), out);
  out = PutFraction(negative ? -d.nanos() : d.nanos(), out);
  return Put("s\"", out);
}

char* PutField(absl::string_view name, bool has, const google::protobuf::Timestamp& t,
               char* out) {
  if (!has) return out;
  out = PutName(name, out);
  // Consecutive lines mostly fall in the same second: each thread formats a second once.
  thread_local int64_t formatted_second = 0;
  thread_local std::string formatted = "1970-01-01T00:00:00";
  if (t.seconds() != formatted_second) {
    formatted_second = t.seconds();
    formatted = absl::FormatTime("%Y-%m-%dT%H:%M:%S", absl::FromUnixSeconds(t.seconds()),
                                 absl::UTCTimeZone());
  }
  *out++ = '"';
  out = Put(formatted, out);
  out = PutFraction(t.nanos(), out);
  return Put("Z\"", out);
}

char* PutTiming(const egress::v1::Timing& timing, char* out) {
  out = PutName("timing", out);
  *out++ = '{';
  out = PutField("dns", timing.has_dns(), timing.dns(), out);
  out = PutField("connect", timing.has_connect(), timing.connect(), out);
  out = PutField("tls_handshake", timing.has_tls_handshake(), timing.tls_handshake(), out);
  out = PutField("time_to_first_byte", timing.has_time_to_first_byte(),
                 timing.time_to_first_byte(), out);
  out = PutField("total", timing.has_total(), timing.total(), out);
  *out++ = '}';
  return out;
}

// Room for the names, punctuation, numbers, times and durations of a line (under 900
// bytes with every field at its longest), and six bytes for each byte of the entry's wire
// form, which holds every string's bytes: a field added to the entry is counted without
// a line here.
size_t LineBound(const egress::v1::AccessLogEntry& e) { return 1024 + 6 * e.ByteSizeLong(); }

char* PutEntry(const egress::v1::AccessLogEntry& e, char* out) {
  *out++ = '{';
  out = PutField("time", e.has_time(), e.time(), out);
  out = PutField("rpc", e.rpc(), out);
  out = PutField("caller", e.caller(), out);
  out = PutField("peer", e.peer(), out);
  out = PutField("method", e.method(), out);
  out = PutField("url", e.url(), out);
  out = PutField("origin", e.origin(), out);
  out = PutField("remote_address", e.remote_address(), out);
  out = PutField("status_code", e.status_code(), out);
  out = PutField("grpc_code", e.grpc_code(), out);
  out = PutField("error_reason", e.error_reason(), out);
  out = PutField("error_message", e.error_message(), out);
  out = PutField("bytes_sent", e.bytes_sent(), out);
  out = PutField("bytes_received", e.bytes_received(), out);
  if (e.has_timing()) out = PutTiming(e.timing(), out);
  out = PutField("connection_reused", e.connection_reused(), out);
  out = PutField("connection_id", e.connection_id(), out);
  out = PutField("drain", e.drain(), out);
  out = PutField("drained_bytes", e.drained_bytes(), out);
  out = PutField("policy_decision", e.policy_decision(), out);
  out = PutField("policy_rule", e.policy_rule(), out);
  out = PutName("would_deny_rules", out);
  *out++ = '[';
  for (int i = 0; i < e.would_deny_rules_size(); ++i) {
    if (i > 0) *out++ = ',';
    out = PutString(e.would_deny_rules(i), out);
  }
  *out++ = ']';
  out = PutField("trace_id", e.trace_id(), out);
  out = PutField("span_id", e.span_id(), out);
  out = PutField("parent_span_id", e.parent_span_id(), out);
  out = PutField("redirects", e.redirects(), out);
  out = PutField("protocol", e.protocol(), out);
  *out++ = '}';
  return out;
}

}  // namespace

void AppendAccessLogJson(const egress::v1::AccessLogEntry& entry, std::string* out) {
  const size_t start = out->size();
  out->resize(start + LineBound(entry));
  char* const begin = out->data() + start;
  out->resize(start + (PutEntry(entry, begin) - begin));
}

}  // namespace egress
