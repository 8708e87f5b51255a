#include "service/access_log/access_log_json.h"

#include <cstdint>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "google/protobuf/duration.pb.h"
#include "google/protobuf/timestamp.pb.h"
#include "service/fetch/utf8_text.h"

namespace egress {
namespace {

// A JSON string. Most are printable ASCII and are appended whole after one look at
// each byte; the rest are escaped, and bytes that are not UTF-8 written as \xNN first
// (a JSON parser may refuse invalid UTF-8, e.g. a caller's identity from binary metadata).
void AppendString(absl::string_view text, std::string* out) {
  out->push_back('"');
  bool plain = true;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte >= 0x80 || c == '"' || c == '\\') {
      plain = false;
      break;
    }
  }
  if (plain) {
    out->append(text.data(), text.size());
    out->push_back('"');
    return;
  }
  std::string escaped;
  if (!IsUtf8(text)) text = escaped = EscapeNonUtf8(text);
  for (const char c : text) {
    switch (c) {
      case '"': out->append("\\\""); break;
      case '\\': out->append("\\\\"); break;
      case '\n': out->append("\\n"); break;
      case '\r': out->append("\\r"); break;
      case '\t': out->append("\\t"); break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppendFormat(out, "\\u%04x", static_cast<unsigned char>(c));
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}

// `"name":`, with the comma before it unless it opens its object.
void AppendName(absl::string_view name, std::string* out) {
  if (out->back() != '{') out->push_back(',');
  out->push_back('"');
  out->append(name.data(), name.size());
  out->append("\":");
}

void AppendField(absl::string_view name, absl::string_view value, std::string* out) {
  AppendName(name, out);
  AppendString(value, out);
}

template <class Integer>
void AppendInteger(Integer value, std::string* out) {
  char digits[absl::numbers_internal::kFastToBufferSize];
  out->append(digits, absl::numbers_internal::FastIntToBuffer(value, digits) - digits);
}

void AppendField(absl::string_view name, int32_t value, std::string* out) {
  AppendName(name, out);
  AppendInteger(value, out);
}

void AppendField(absl::string_view name, uint32_t value, std::string* out) {
  AppendName(name, out);
  AppendInteger(value, out);
}

// 64-bit integers are JSON strings in the mapping (a double cannot hold them all).
void AppendField(absl::string_view name, uint64_t value, std::string* out) {
  AppendName(name, out);
  out->push_back('"');
  AppendInteger(value, out);
  out->push_back('"');
}

void AppendField(absl::string_view name, bool value, std::string* out) {
  AppendName(name, out);
  out->append(value ? "true" : "false");
}

// Nanoseconds after the point as the JSON mapping writes them: 0, 3, 6 or 9 digits, as
// few as hold them.
void AppendFraction(int32_t nanos, std::string* out) {
  if (nanos == 0) return;
  int digits = 9;
  for (; digits > 3 && nanos % 1000 == 0; digits -= 3) nanos /= 1000;
  char text[10] = {'.'};
  for (int i = digits; i > 0; --i, nanos /= 10) text[i] = static_cast<char>('0' + nanos % 10);
  out->append(text, digits + 1);
}

// A message field that is not set is left out, as MessageToJsonString does.
void AppendField(absl::string_view name, bool has, const google::protobuf::Duration& d,
                 std::string* out) {
  if (!has) return;
  AppendName(name, out);
  const bool negative = d.seconds() < 0 || d.nanos() < 0;
  out->append(negative ? "\"-" : "\"");
  AppendInteger(negative ? -d.seconds() : d.seconds(), out);
  AppendFraction(negative ? -d.nanos() : d.nanos(), out);
  out->append("s\"");
}

void AppendField(absl::string_view name, bool has, const google::protobuf::Timestamp& t,
                 std::string* out) {
  if (!has) return;
  AppendName(name, out);
  // Consecutive lines mostly fall in the same second: each thread formats a second once.
  thread_local int64_t formatted_second = 0;
  thread_local std::string formatted = "1970-01-01T00:00:00";
  if (t.seconds() != formatted_second) {
    formatted_second = t.seconds();
    formatted = absl::FormatTime("%Y-%m-%dT%H:%M:%S", absl::FromUnixSeconds(t.seconds()),
                                 absl::UTCTimeZone());
  }
  out->push_back('"');
  out->append(formatted);
  AppendFraction(t.nanos(), out);
  out->append("Z\"");
}

void AppendTiming(const egress::v1::Timing& timing, std::string* out) {
  AppendName("timing", out);
  out->push_back('{');
  AppendField("dns", timing.has_dns(), timing.dns(), out);
  AppendField("connect", timing.has_connect(), timing.connect(), out);
  AppendField("tls_handshake", timing.has_tls_handshake(), timing.tls_handshake(), out);
  AppendField("time_to_first_byte", timing.has_time_to_first_byte(),
              timing.time_to_first_byte(), out);
  AppendField("total", timing.has_total(), timing.total(), out);
  out->push_back('}');
}

}  // namespace

void AppendAccessLogJson(const egress::v1::AccessLogEntry& e, std::string* out) {
  out->push_back('{');
  AppendField("time", e.has_time(), e.time(), out);
  AppendField("rpc", e.rpc(), out);
  AppendField("caller", e.caller(), out);
  AppendField("peer", e.peer(), out);
  AppendField("method", e.method(), out);
  AppendField("url", e.url(), out);
  AppendField("origin", e.origin(), out);
  AppendField("remote_address", e.remote_address(), out);
  AppendField("status_code", e.status_code(), out);
  AppendField("grpc_code", e.grpc_code(), out);
  AppendField("error_reason", e.error_reason(), out);
  AppendField("error_message", e.error_message(), out);
  AppendField("bytes_sent", e.bytes_sent(), out);
  AppendField("bytes_received", e.bytes_received(), out);
  if (e.has_timing()) AppendTiming(e.timing(), out);
  AppendField("connection_reused", e.connection_reused(), out);
  AppendField("connection_id", e.connection_id(), out);
  AppendField("drain", e.drain(), out);
  AppendField("drained_bytes", e.drained_bytes(), out);
  AppendField("policy_decision", e.policy_decision(), out);
  AppendField("policy_rule", e.policy_rule(), out);
  AppendName("would_deny_rules", out);
  out->push_back('[');
  for (int i = 0; i < e.would_deny_rules_size(); ++i) {
    if (i > 0) out->push_back(',');
    AppendString(e.would_deny_rules(i), out);
  }
  out->push_back(']');
  AppendField("trace_id", e.trace_id(), out);
  AppendField("span_id", e.span_id(), out);
  AppendField("parent_span_id", e.parent_span_id(), out);
  AppendField("redirects", e.redirects(), out);
  AppendField("protocol", e.protocol(), out);
  out->push_back('}');
}

}  // namespace egress
