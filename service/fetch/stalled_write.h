#ifndef EGRESS_SERVICE_FETCH_STALLED_WRITE_H_
#define EGRESS_SERVICE_FETCH_STALLED_WRITE_H_

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace egress::fetch {

// A FetchStream whose caller stops taking messages: a message still waiting for the caller
// this long after the call's deadline ends the call (the front end cancels its stream), so
// that the caller does not hold the upstream connection, a chunk of the body budget and
// its fetch slots until its transport gives up on it. A caller that reads, however slowly,
// takes each message well within it and meets the fetch's own deadline instead.
inline constexpr absl::Duration kStalledWriteGrace = absl::Seconds(1);

// The status egress counts and logs for it (the caller sees its stream cancelled).
absl::Status StalledWrite();

}  // namespace egress::fetch

#endif  // EGRESS_SERVICE_FETCH_STALLED_WRITE_H_
