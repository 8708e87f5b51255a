#ifndef EGRESS_SERVICE_TRANSPORT_HTTP1_IDLE_PROBE_H_
#define EGRESS_SERVICE_TRANSPORT_HTTP1_IDLE_PROBE_H_

#include "service/transport/io/upstream_stream.h"

namespace egress::transport {

// What an idle HTTP/1.1 connection's socket says before the connection is reused.
enum class IdleProbe {
  kQuiet,           // open, nothing waiting
  kQuietAfterTls,   // open; TLS housekeeping (session tickets) was taken in, nothing else
  kClosedOrNoisy,   // the server closed it, or sent bytes nobody asked for: not reusable
};

// Looks at an idle connection's socket without waiting: a poll for a hang-up or unasked
// bytes, and on TLS a read that takes in session tickets and stops at anything else
// (the byte it may read is lost, but so is the connection then). No I/O may be pending
// on `stream`.
IdleProbe ProbeIdle(UpstreamStream& stream);

}  // namespace egress::transport

#endif  // EGRESS_SERVICE_TRANSPORT_HTTP1_IDLE_PROBE_H_
