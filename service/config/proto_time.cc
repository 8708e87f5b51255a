#include "service/config/proto_time.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/reflection.h"

namespace egress {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

// google/protobuf/duration.proto's range: about 10,000 years, nanos of the same sign.
constexpr int64_t kMaxDurationSeconds = 315'576'000'000;
constexpr int32_t kMaxDurationNanos = 999'999'999;

bool InRange(const google::protobuf::Duration& d) {
  if (d.seconds() > kMaxDurationSeconds || d.seconds() < -kMaxDurationSeconds) return false;
  if (d.nanos() > kMaxDurationNanos || d.nanos() < -kMaxDurationNanos) return false;
  return !(d.seconds() > 0 && d.nanos() < 0) && !(d.seconds() < 0 && d.nanos() > 0);
}

absl::Status Check(const Message& message, const std::string& path) {
  if (message.GetDescriptor() == google::protobuf::Duration::descriptor()) {
    google::protobuf::Duration d;
    d.CopyFrom(message);
    if (InRange(d)) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": not a valid google.protobuf.Duration (seconds ", d.seconds(), ", nanos ",
        d.nanos(), "; seconds within +-", kMaxDurationSeconds, ", nanos within +-",
        kMaxDurationNanos, " and of the same sign)"));
  }
  const google::protobuf::Reflection* reflection = message.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  reflection->ListFields(message, &fields);  // only those set: a walk of what was sent
  for (const FieldDescriptor* field : fields) {
    if (field->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) continue;
    const std::string name = path.empty() ? field->name() : absl::StrCat(path, ".", field->name());
    if (!field->is_repeated()) {
      if (auto status = Check(reflection->GetMessage(message, field), name); !status.ok()) {
        return status;
      }
      continue;
    }
    const int count = reflection->FieldSize(message, field);
    for (int i = 0; i < count; ++i) {
      const Message& element = reflection->GetRepeatedMessage(message, field, i);
      if (auto status = Check(element, absl::StrCat(name, "[", i, "]")); !status.ok()) {
        return status;
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckDurations(const Message& message, const std::string& path) {
  return Check(message, path);
}

}  // namespace egress
