#ifndef EGRESS_SERVICE_FETCH_UTF8_TEXT_H_
#define EGRESS_SERVICE_FETCH_UTF8_TEXT_H_

#include <string>

#include "absl/strings/string_view.h"

namespace egress {

// Every string field and error message egressd writes must be valid UTF-8: protobuf
// refuses to parse anything else in a proto3 string (the Python client then fails the
// whole call). Upstream header values may hold any octet (RFC 9110), and messages may
// quote them. "Valid" here is exactly what protobuf checks.

bool IsUtf8(absl::string_view text);

// The bytes read as ISO-8859-1, written as UTF-8: every byte survives, for display.
std::string Latin1ToUtf8(absl::string_view bytes);

// `text` with each byte that is not part of valid UTF-8 written as \xNN; valid text is
// returned as it is.
std::string EscapeNonUtf8(absl::string_view text);

}  // namespace egress

#endif  // EGRESS_SERVICE_FETCH_UTF8_TEXT_H_
