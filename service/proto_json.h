#ifndef EGRESS_SERVICE_PROTO_JSON_H_
#define EGRESS_SERVICE_PROTO_JSON_H_

#include <string>

#include "google/protobuf/message.h"

namespace egress {

// Appends `message` to `out` as one line of JSON in protobuf's JSON mapping, every field
// present (defaults included), names as in the .proto: what MessageToJsonString gives
// with always_print_primitive_fields and preserve_proto_field_names, at a tenth of its
// cost (it converts through the binary form and a type resolver: 16 us per access log
// line). Covers scalars, enums, strings, repeated fields, nested messages, Duration and
// Timestamp; no maps, Any or wrappers (the access log has none).
void AppendProtoJson(const google::protobuf::Message& message, std::string* out);

}  // namespace egress

#endif  // EGRESS_SERVICE_PROTO_JSON_H_
