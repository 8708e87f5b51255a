#include "service/proto_json.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/duration.pb.h"
#include "google/protobuf/timestamp.pb.h"
#include "service/utf8_text.h"

namespace egress {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

bool NeedsEscape(char c) { return c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20; }

void AppendString(absl::string_view text, std::string* out) {
  // A JSON parser may refuse invalid UTF-8 (a caller's identity from binary metadata).
  std::string escaped;
  if (!IsUtf8(text)) text = escaped = EscapeNonUtf8(text);
  out->push_back('"');
  // Most strings need no escape: appended whole.
  if (std::none_of(text.begin(), text.end(), NeedsEscape)) {
    out->append(text.data(), text.size());
    out->push_back('"');
    return;
  }
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

void AppendDuration(const google::protobuf::Duration& d, std::string* out) {
  const bool negative = d.seconds() < 0 || d.nanos() < 0;
  absl::StrAppend(out, "\"", negative ? "-" : "", negative ? -d.seconds() : d.seconds());
  AppendFraction(negative ? -d.nanos() : d.nanos(), out);
  out->append("s\"");
}

void AppendTimestamp(const google::protobuf::Timestamp& t, std::string* out) {
  absl::StrAppend(out, "\"", absl::FormatTime("%Y-%m-%dT%H:%M:%S",
                                              absl::FromUnixSeconds(t.seconds()),
                                              absl::UTCTimeZone()));
  AppendFraction(t.nanos(), out);
  out->append("Z\"");
}

void AppendValue(const Message& message, const FieldDescriptor* field, int index,
                 std::string* out);

void AppendMessage(const Message& message, std::string* out) {
  const auto* descriptor = message.GetDescriptor();
  // The well-known types are the generated classes (one descriptor each).
  if (descriptor == google::protobuf::Duration::descriptor()) {
    return AppendDuration(static_cast<const google::protobuf::Duration&>(message), out);
  }
  if (descriptor == google::protobuf::Timestamp::descriptor()) {
    return AppendTimestamp(static_cast<const google::protobuf::Timestamp&>(message), out);
  }
  const Reflection* reflection = message.GetReflection();
  out->push_back('{');
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const FieldDescriptor* field = descriptor->field(i);
    // A message field that is not set is left out, as MessageToJsonString does.
    if (!field->is_repeated() && field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE &&
        !reflection->HasField(message, field)) {
      continue;
    }
    if (out->back() != '{') out->push_back(',');
    absl::StrAppend(out, "\"", field->name(), "\":");  // a name needs no escape
    if (!field->is_repeated()) {
      AppendValue(message, field, -1, out);
      continue;
    }
    out->push_back('[');
    for (int j = 0; j < reflection->FieldSize(message, field); ++j) {
      if (j > 0) out->push_back(',');
      AppendValue(message, field, j, out);
    }
    out->push_back(']');
  }
  out->push_back('}');
}

// The value of `field` (element `index` of a repeated one; -1 for a singular one).
void AppendValue(const Message& message, const FieldDescriptor* field, int index,
                 std::string* out) {
  const Reflection* r = message.GetReflection();
  const bool one = index < 0;
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_STRING:
      return AppendString(one ? r->GetString(message, field)
                              : r->GetRepeatedString(message, field, index),
                          out);
    case FieldDescriptor::CPPTYPE_BOOL:
      out->append((one ? r->GetBool(message, field) : r->GetRepeatedBool(message, field, index))
                      ? "true"
                      : "false");
      return;
    case FieldDescriptor::CPPTYPE_INT32:
      return absl::StrAppend(out, one ? r->GetInt32(message, field)
                                      : r->GetRepeatedInt32(message, field, index));
    case FieldDescriptor::CPPTYPE_UINT32:
      return absl::StrAppend(out, one ? r->GetUInt32(message, field)
                                      : r->GetRepeatedUInt32(message, field, index));
    // 64-bit integers are JSON strings in the mapping (a double cannot hold them all).
    case FieldDescriptor::CPPTYPE_INT64:
      return absl::StrAppend(out, "\"", one ? r->GetInt64(message, field)
                                            : r->GetRepeatedInt64(message, field, index), "\"");
    case FieldDescriptor::CPPTYPE_UINT64:
      return absl::StrAppend(out, "\"", one ? r->GetUInt64(message, field)
                                            : r->GetRepeatedUInt64(message, field, index), "\"");
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return absl::StrAppend(out, one ? r->GetDouble(message, field)
                                      : r->GetRepeatedDouble(message, field, index));
    case FieldDescriptor::CPPTYPE_FLOAT:
      return absl::StrAppend(out, one ? r->GetFloat(message, field)
                                      : r->GetRepeatedFloat(message, field, index));
    case FieldDescriptor::CPPTYPE_ENUM:
      return AppendString((one ? r->GetEnum(message, field)
                               : r->GetRepeatedEnum(message, field, index))->name(),
                          out);
    case FieldDescriptor::CPPTYPE_MESSAGE:
      return AppendMessage(one ? r->GetMessage(message, field)
                               : r->GetRepeatedMessage(message, field, index),
                           out);
  }
}

}  // namespace

void AppendProtoJson(const Message& message, std::string* out) { AppendMessage(message, out); }

}  // namespace egress
