#ifndef EGRESS_SERVICE_CONFIG_PROTO_TIME_H_
#define EGRESS_SERVICE_CONFIG_PROTO_TIME_H_

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "google/protobuf/duration.pb.h"
#include "google/protobuf/message.h"
#include "google/protobuf/timestamp.pb.h"

namespace egress {

// INVALID_ARGUMENT, naming the field's path, when any google.protobuf.Duration set anywhere
// in `message` lies outside the range duration.proto defines (|seconds| up to about 10,000
// years, |nanos| below a second, both of one sign): what a caller or a config sends is
// checked here once, whole, before any field is read as an absl::Duration.
// `path` names `message` itself in the error (empty for a top-level message).
absl::Status CheckDurations(const google::protobuf::Message& message, const std::string& path = "");

inline absl::Duration FromProto(const google::protobuf::Duration& d) {
  return absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos());
}

inline void ToProto(absl::Duration d, google::protobuf::Duration* out) {
  const int64_t seconds = absl::IDivDuration(d, absl::Seconds(1), &d);
  out->set_seconds(seconds);
  out->set_nanos(static_cast<int32_t>(absl::ToInt64Nanoseconds(d)));
}

inline void ToProto(absl::Time t, google::protobuf::Timestamp* out) {
  const int64_t nanoseconds = absl::ToUnixNanos(t);
  out->set_seconds(nanoseconds / 1'000'000'000);
  out->set_nanos(static_cast<int32_t>(nanoseconds % 1'000'000'000));
}

}  // namespace egress

#endif  // EGRESS_SERVICE_CONFIG_PROTO_TIME_H_
