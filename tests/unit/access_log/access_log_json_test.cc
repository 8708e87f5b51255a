// AppendAccessLogJson writes what protobuf's own JSON printer writes (as JSON values: the
// order of fields may differ), for every kind of field the access log holds.
#include "service/access_log/access_log_json.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "egress/v1/egress.pb.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"

namespace egress {
namespace {

using egress::v1::AccessLogEntry;

google::protobuf::Value Parsed(const std::string& json) {
  google::protobuf::Value value;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json, &value).ok()) << json;
  return value;
}

void ExpectSameAsProtobuf(const AccessLogEntry& entry) {
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  std::string expected;
  ASSERT_TRUE(google::protobuf::util::MessageToJsonString(entry, &expected, options).ok());
  std::string ours;
  AppendAccessLogJson(entry, &ours);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(Parsed(ours), Parsed(expected)))
      << "ours:     " << ours << "\nprotobuf: " << expected;
}

TEST(AccessLogJsonTest, AnEmptyEntryHasEveryPrimitiveFieldAndNoUnsetMessage) {
  ExpectSameAsProtobuf(AccessLogEntry());
}

// What SetEveryField gives each kind of field the entry has (its messages are left to
// the test).
struct FieldValues {
  std::function<std::string(const google::protobuf::FieldDescriptor&)> text;
  std::vector<std::string> repeated_text;
  int32_t int32;
  uint32_t uint32;
  uint64_t uint64;
};

// Every field of an entry but its messages, set by reflection: a field added to
// AccessLogEntry is set without a line here (and one of a kind not here fails the test).
void SetEveryField(const FieldValues& values, AccessLogEntry* entry) {
  const auto* descriptor = entry->GetDescriptor();
  const auto* reflection = entry->GetReflection();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const auto* field = descriptor->field(i);
    using google::protobuf::FieldDescriptor;
    switch (field->cpp_type()) {
      case FieldDescriptor::CPPTYPE_STRING:
        if (field->is_repeated()) {
          for (const std::string& text : values.repeated_text) {
            reflection->AddString(entry, field, text);
          }
        } else {
          reflection->SetString(entry, field, values.text(*field));
        }
        break;
      case FieldDescriptor::CPPTYPE_BOOL: reflection->SetBool(entry, field, true); break;
      case FieldDescriptor::CPPTYPE_INT32: reflection->SetInt32(entry, field, values.int32); break;
      case FieldDescriptor::CPPTYPE_UINT32:
        reflection->SetUInt32(entry, field, values.uint32);
        break;
      case FieldDescriptor::CPPTYPE_UINT64:
        reflection->SetUInt64(entry, field, values.uint64);
        break;
      case FieldDescriptor::CPPTYPE_MESSAGE: break;
      default:
        ADD_FAILURE() << "AccessLogEntry has a field of a kind this test does not set: "
                      << field->name();
    }
  }
}

TEST(AccessLogJsonTest, EveryFieldSetComesOutAsProtobufWritesIt) {
  AccessLogEntry entry;
  SetEveryField({[](const google::protobuf::FieldDescriptor& field) {
                   return field.name() + " \"quoted\" \\ \x01 é\n";
                 },
                 {"a", "b\"c"}, -7, 4000000000u, 18446744073709551615u},
                &entry);
  entry.mutable_time()->set_seconds(1764680000);
  entry.mutable_time()->set_nanos(123000000);
  auto* timing = entry.mutable_timing();
  timing->mutable_dns()->set_nanos(1000);           // 6 digits
  timing->mutable_connect()->set_nanos(1);          // 9 digits
  timing->mutable_tls_handshake()->set_seconds(2);  // none
  timing->mutable_time_to_first_byte()->set_nanos(5000000);  // 3 digits
  timing->mutable_total()->set_seconds(1);
  timing->mutable_total()->set_nanos(500000000);
  ExpectSameAsProtobuf(entry);
}

TEST(AccessLogJsonTest, TimestampsWithoutFractionsAndLongDurationsMatch) {
  AccessLogEntry entry;
  entry.mutable_time()->set_seconds(0);
  entry.mutable_timing()->mutable_total()->set_seconds(86400 * 400);
  entry.mutable_timing()->mutable_total()->set_nanos(999999999);
  ExpectSameAsProtobuf(entry);
}

TEST(AccessLogJsonTest, BytesThatAreNotUtf8AreEscapedSoThatTheLineStaysValidJson) {
  AccessLogEntry entry;
  entry.set_caller("caller-\xff\xfe");
  std::string ours;
  AppendAccessLogJson(entry, &ours);
  EXPECT_EQ(Parsed(ours).struct_value().fields().at("caller").string_value(),
            "caller-\\xFF\\xFE");
}

// Each string at its longest once escaped (a control character takes six bytes, a byte
// that is not UTF-8 five), every number at its widest: the line is written into room made
// for it beforehand, and a line past that room would write outside the string (which the
// ASan build reports).
TEST(AccessLogJsonTest, EveryFieldAtItsWidestFitsTheRoomMadeForTheLine) {
  for (const std::string& worst : {std::string(300, '\x01'), std::string(300, '\xff')}) {
    AccessLogEntry entry;
    SetEveryField({[&](const google::protobuf::FieldDescriptor&) { return worst; },
                   {worst, worst, worst}, INT32_MIN, UINT32_MAX, UINT64_MAX},
                  &entry);
    entry.mutable_time()->set_seconds(253402300799);  // 9999-12-31T23:59:59
    entry.mutable_time()->set_nanos(999999999);
    for (auto* duration : {entry.mutable_timing()->mutable_dns(),
                           entry.mutable_timing()->mutable_connect(),
                           entry.mutable_timing()->mutable_tls_handshake(),
                           entry.mutable_timing()->mutable_time_to_first_byte(),
                           entry.mutable_timing()->mutable_total()}) {
      duration->set_seconds(-315576000000);
      duration->set_nanos(-999999999);
    }
    std::string ours;
    AppendAccessLogJson(entry, &ours);
    const auto fields = Parsed(ours).struct_value().fields();
    const std::string escaped = worst[0] == '\x01' ? "\x01" : "\\xFF";
    std::string expected;
    for (int i = 0; i < 300; ++i) expected += escaped;
    EXPECT_EQ(fields.at("error_message").string_value(), expected);
    EXPECT_EQ(fields.at("would_deny_rules").list_value().values_size(), 3);
    EXPECT_EQ(fields.at("timing").struct_value().fields().at("total").string_value(),
              "-315576000000.999999999s");
  }
}

}  // namespace
}  // namespace egress
