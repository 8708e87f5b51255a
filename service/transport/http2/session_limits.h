#ifndef EGRESS_SERVICE_TRANSPORT_HTTP2_SESSION_LIMITS_H_
#define EGRESS_SERVICE_TRANSPORT_HTTP2_SESSION_LIMITS_H_

#include <cstddef>
#include <cstdint>

#include "absl/time/time.h"

namespace egress::transport::http2 {

// A request's header block, compressed, at most (nghttp2's default, made explicit).
inline constexpr size_t kMaxRequestHeaderBlockBytes = 64 * 1024;

// Bounds on what one HTTP/2 connection lets its server make egress hold or do.
struct SessionLimits {
  // Streams open at once, at most; the server's SETTINGS_MAX_CONCURRENT_STREAMS, when
  // lower, is the limit.
  uint32_t max_concurrent_streams = 100;
  // The receive windows egress advertises (1 to 2^31 - 1). A stream's window opens again only as its
  // caller reads (nghttp2_session_consume_stream), so a slow caller makes egress buffer
  // at most one stream window for its stream; the connection's reopens as bytes arrive,
  // so that callers who stop reading hold up nobody else's body (it bounds what is in
  // flight, not what is held: all streams together hold at most max_concurrent_streams
  // stream windows).
  //
  // A stream's window is what its request's BodyMemory has reserved, never more: bytes
  // a server may send must be buffered whatever happens. It starts at
  // initial_stream_window_bytes (SETTINGS_INITIAL_WINDOW_SIZE, at most
  // stream_window_bytes), reserved before the request goes out (a request that cannot
  // reserve it fails with BodyMemory's status, and nothing is sent), and grows by what
  // its caller reads, up to stream_window_bytes, as far as reservations succeed: a caller
  // that keeps up gets the whole window, one that stops holds only what it had. The
  // reservation shrinks to what is buffered once the body has all arrived, and goes
  // back as the rest is read, dropped or reset.
  uint32_t stream_window_bytes = 256 * 1024;
  // Every stream reserves its first window at submit, whether its answer has a body or
  // not (a HEAD, a 204), so this bounds how many fetches the budget lets be in flight:
  // 16 KiB lets the default limits.max_concurrent_fetches (10,000) all hold a stream
  // within the default buffered_body_budget_bytes (256 MiB: 160 MiB), where 64 KiB
  // refused every HTTP/2 fetch past 4,096. A fixed figure, not the budget divided by
  // max_concurrent_fetches: it goes out once per connection in SETTINGS, while both
  // limits change with UpdateConfig under live connections. 16 KiB is one DATA frame of
  // the default SETTINGS_MAX_FRAME_SIZE, so a server need not split frames; a body
  // larger than it costs a few more WINDOW_UPDATEs while its window doubles per read up
  // to stream_window_bytes.
  uint32_t initial_stream_window_bytes = 16 * 1024;
  uint32_t connection_window_bytes = 4 * 1024 * 1024;
  // A response's header block (and trailers), decoded, counted as RFC 9113 counts
  // SETTINGS_MAX_HEADER_LIST_SIZE (name + value + 32 a field): over it the stream fails
  // (the rest of the block is decoded for nobody). As transport.max_response_header_bytes.
  // A header block in more than 8 CONTINUATION frames ends the session (nghttp2's bound,
  // Debian's fix of CVE-2024-28182).
  uint32_t max_header_list_bytes = 64 * 1024;
  uint32_t max_interim_responses = 5;  // 1xx heads before the final one, per stream
  // SETTINGS and PING acknowledgements waiting to be sent (a server that floods them
  // and reads nothing), and entries in one SETTINGS frame; past either the session ends.
  uint32_t max_queued_acks = 1000;
  uint32_t max_settings_entries = 32;
  // A write that has not completed after this long (the server reads nothing) ends the
  // session.
  absl::Duration write_timeout = absl::Seconds(30);
};

// What a session holds and has done, for tests and metrics; from any thread.
struct SessionStats {
  uint32_t open_streams = 0;
  uint64_t streams_opened = 0;
  // Response body bytes received and not yet read by callers, now and at the most.
  uint64_t buffered_body_bytes = 0;
  uint64_t peak_buffered_body_bytes = 0;
  // Bytes taken from nghttp2 to be written (one write in flight and the next batch),
  // now and at the most.
  uint64_t write_buffer_bytes = 0;
  uint64_t peak_write_buffer_bytes = 0;
};

}  // namespace egress::transport::http2

#endif  // EGRESS_SERVICE_TRANSPORT_HTTP2_SESSION_LIMITS_H_
