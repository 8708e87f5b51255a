// ServerSession's deadlines and stalls: what happens at a call's deadline, the reset of a
// stream whose caller takes nothing, and the end of a connection whose writes are stuck.

#include <algorithm>
#include <utility>

#include "absl/time/clock.h"
#include "service/base/error_reason.h"
#include "service/dataplane/server_session.h"
#include "service/fetch/status_mapping.h"

namespace egress::dataplane {

// What gRPC's library does at a call's deadline. A call whose answer has begun and is not
// all taken (a FetchStream, or an answer the caller's window holds back) is reset: its
// sender learns DEADLINE_EXCEEDED. A request not yet whole is answered DEADLINE_EXCEEDED.
// A call under way that has sent nothing is left to the fetch's own deadline, never later
// than this one, at which the transport answers DEADLINE_EXCEEDED: cancelling it here
// would race that answer and count the fetch CANCELLED.
void ServerSession::OnDeadline(int32_t stream_id) {
  Stream* stream = Find(stream_id);
  if (!stream || ended_ || (stream->answered && stream->pending.done())) return;
  if (stream->streams_requests && stream->pending.done()) {  // waiting for the caller
    if (stream->watcher) stream->watcher->OnStreamReset();  // its method learns it, as of Refuse
    return Finish(stream_id, ToGrpcStatus(transport::WithReason(
                                 absl::DeadlineExceededError(
                                     "the call's deadline (grpc-timeout, at most "
                                     "limits.max_timeout) passed"),
                                 "DEADLINE_EXCEEDED")));
  }
  if (stream->head_sent) {
    return Reset(stream_id, *stream,
                 transport::WithReason(
                     absl::DeadlineExceededError(
                         "the call's deadline (grpc-timeout, at most limits.max_timeout) "
                         "passed before the caller took the answer"),
                     "DEADLINE_EXCEEDED"));
  }
  if (stream->started) return;
  observer_.OnCallRefused(CallRefusal::kDeadlineBeforeRequest);
  Refuse(stream_id, *stream,
         transport::WithReason(
             absl::DeadlineExceededError(
                 "the request message did not arrive whole before the call's deadline "
                 "(grpc-timeout, at most limits.max_timeout)"),
             "DEADLINE_EXCEEDED"));
}

void ServerSession::Reset(int32_t stream_id, Stream& stream, absl::Status why) {
  stream.reset = std::move(why);
  nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, stream_id, NGHTTP2_CANCEL);
  Flush();
  if (writing_) EndIfWriteStuck();
}

// The reset goes out after the write under way, and the stream ends only then: a caller
// that takes no bytes at all (its TCP window shut) would keep its calls, their upstream
// connections and their body budget forever. A write not done kStuckWriteGrace later
// ends the connection, and every call on it. Ten seconds, not one: gRPC's C++ client
// stops reading its socket for over a second at times while its application reads
// nothing, and takes the reset later (limits_test's stalled FetchStream against the loops).
void ServerSession::EndIfWriteStuck() {
  if (write_watched_) return;
  write_watched_ = true;
  write_watch_.expires_after(absl::ToChronoNanoseconds(kStuckWriteGrace));
  write_watch_.async_wait(
      [self = shared_from_this(), write = writes_done_](boost::system::error_code ec) {
        self->write_watched_ = false;
        if (ec || self->ended_ || !self->writing_ || self->writes_done_ != write) return;
        self->guard_.Refuse(CallRefusal::kStalledCaller);
        self->End();
      });
}

void ServerSession::ResetIfStalledAt(int32_t stream_id, absl::Time at, absl::Status why) {
  Stream* stream = Find(stream_id);
  if (!stream || ended_) return;
  stream->stall_watch.emplace(executor());
  stream->stall_watch->expires_after(
      absl::ToChronoNanoseconds(std::max(at - absl::Now(), absl::ZeroDuration())));
  stream->stall_watch->async_wait(
      [self = shared_from_this(), stream_id, why = std::move(why)](boost::system::error_code ec) {
        if (ec) return;  // the stream went first
        Stream* stream = self->Find(stream_id);
        if (!stream || self->ended_ || !stream->on_taken) return;  // nothing waits
        self->Reset(stream_id, *stream, why);
      });
}

}  // namespace egress::dataplane
