#include "service/transport/http2/stream.h"

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "boost/asio/post.hpp"
#include "service/base/error_reason.h"
#include "service/transport/http2/errors.h"
#include "service/transport/http2/session.h"
#include "service/transport/observer.h"

namespace egress::transport::http2 {

namespace net = boost::asio;

Stream::Stream(std::shared_ptr<Session> session, RequestBody request_body,
               std::shared_ptr<BodyMemory> memory, HeadCallback on_head)
    : session_(std::move(session)),
      request_body_(std::move(request_body)),
      request_body_size_(request_body_.size()),
      head_done_(std::move(on_head)),
      memory_(std::move(memory)),
      deadline_timer_(session_->executor_) {}

Stream::~Stream() {
  // Whatever it still holds reserved (bytes unread, or a session abandoned with it open):
  // no one else refers to it any more, so no loop is needed.
  if (memory_ && window_ > 0) memory_->Release(window_);
  // Let go of with bytes unread (a Reset stream has none): the windows they held reopen.
  if (const uint64_t unread = body_.size(); unread > 0) {
    net::post(session_->executor_, [session = session_, unread] {
      session->Guard([&] { session->OnStreamDropped(unread); });
    });
  }
}

void Stream::Read(size_t max_bytes, absl::Time deadline, ReadCallback done) {
  net::post(session_->executor_, [self = shared_from_this(), max_bytes, deadline,
                                  done = std::move(done)]() mutable {
    self->session_->Guard([&] { self->ReadOnLoop(max_bytes, deadline, std::move(done)); });
  });
}

void Stream::ReadOnLoop(size_t max_bytes, absl::Time deadline, ReadCallback done) {
  read_done_ = std::move(done);
  read_max_ = std::max<size_t>(max_bytes, 1);
  if (state_ == State::kBody && deadline != deadline_) SetDeadline(deadline);
  Deliver();
  session_->Settle();  // a window update the read made due
}

void Stream::Reset() {
  // The caller is done with it: its place goes now, before the RST_STREAM (see closed_).
  session_->ReleasePlace(*this);
  net::post(session_->executor_, [self = shared_from_this()] {
    Session& session = *self->session_;
    session.Guard([&] {
      self->SendReset(WithReason(absl::CancelledError(absl::StrCat(
                                     "the response from ", session.origin_key_,
                                     " was let go of by its caller")),
                                 "CANCELLED", {{"origin", session.origin_key_}}));
    });
  });
}

void Stream::Deliver() {
  ready_ = false;
  if (head_done_ && (head_ || state_ == State::kFailed)) {
    HeadCallback done = std::exchange(head_done_, nullptr);
    if (!head_) return done(ForCaller(failure_));
    ResponseHead head = std::move(*head_);
    head_.reset();
    done(std::move(head));
  }
  if (!read_done_) return;
  if (state_ == State::kFailed) {
    return std::exchange(read_done_, nullptr)(ForCaller(failure_));
  }
  if (body_.size() > 0) {
    std::string bytes = TakeBody(read_max_);
    body_ended_ = state_ == State::kBodyEnded && body_.size() == 0;
    return std::exchange(read_done_, nullptr)(std::move(bytes));
  }
  if (state_ == State::kBodyEnded) {
    body_ended_ = true;
    return std::exchange(read_done_, nullptr)(std::string());
  }
  // Nothing yet: OnDataChunk marks the stream ready when bytes come.
}

void Stream::SetDeadline(absl::Time deadline) {
  deadline_ = deadline;
  deadline_timer_.cancel();
  if (deadline == absl::InfiniteFuture()) return;
  const absl::Duration left = std::max(deadline - absl::Now(), absl::ZeroDuration());
  deadline_timer_.expires_after(absl::ToChronoNanoseconds(left));
  deadline_timer_.async_wait([self = shared_from_this()](boost::beast::error_code ec) {
    if (ec) return;  // moved, or the stream ended
    // A completion already on its way when the deadline was moved.
    if (self->deadline_timer_.expiry() > std::chrono::steady_clock::now()) return;
    self->session_->Guard([&] { self->OnDeadline(); });
  });
}

void Stream::MarkReady() {
  if (std::exchange(ready_, true)) return;
  session_->ready_.push_back(shared_from_this());
}

void Stream::Close() {
  Session& session = *session_;
  if (session.ReleasePlace(*this) && session.events_.stream_closed) {
    session.deferred_.push_back(session.events_.stream_closed);
  }
}

void Stream::Fail(absl::Status why) {
  if (state_ == State::kFailed) return;
  // Whoever hears of the failure may open another stream at once: its place is free now,
  // whenever nghttp2 lets go of the stream (see closed_).
  Close();
  state_ = State::kFailed;
  failure_ = std::move(why);
  DropBody();
  ReleaseSpareWindow();
  deadline_timer_.cancel();
  MarkReady();
}

void Stream::SendReset(absl::Status why) {
  if (state_ == State::kFailed) return;
  Session& session = *session_;
  if (session.state_ != Session::State::kEnded && session.streams_.contains(id_)) {
    // Cannot fail for a stream nghttp2 knows; a queued request is simply not sent.
    nghttp2_submit_rst_stream(session.session_.get(), NGHTTP2_FLAG_NONE, id_, NGHTTP2_CANCEL);
  }
  Fail(std::move(why));
  session.Settle();
}

void Stream::EndBody() {
  if (state_ != State::kBody) return;
  state_ = State::kBodyEnded;
  body_received_ = true;
  deadline_timer_.cancel();  // the whole body is here
  if (body_.size() == 0) body_ended_ = true;
  ReleaseSpareWindow();
  MarkReady();
}

void Stream::OnHeadersReceived(bool end_stream) {
  Session& session = *session_;
  if (state_ == State::kAwaitingHead) {
    const int status = head_in_progress_.status_code;
    if (status < 100) {  // found by fuzz/http2_response_fuzzer.cc: nghttp2 takes 000-099
      nghttp2_submit_rst_stream(session.session_.get(), NGHTTP2_FLAG_NONE, id_,
                                NGHTTP2_PROTOCOL_ERROR);
      return Fail(InvalidResponse(session.origin_key_,
                                  absl::StrCat("status code ", status, " is below 100")));
    }
    if (status < 200) {  // interim: the final head follows
      if (++interim_responses_ > session.limits_.max_interim_responses) {
        session.observer_.OnUpstreamLimit(session.origin_, UpstreamLimit::kInterimResponses);
        nghttp2_submit_rst_stream(session.session_.get(), NGHTTP2_FLAG_NONE, id_,
                                  NGHTTP2_CANCEL);
        Fail(LimitExceeded(session.origin_key_,
                           absl::StrCat("more than ", session.limits_.max_interim_responses,
                                        " interim (1xx) responses before the final one "
                                        "(transport.max_interim_responses)")));
      }
      return;
    }
    head_ = std::move(head_in_progress_);
    head_in_progress_ = ResponseHead{};
    state_ = State::kBody;
    MarkReady();
  }
  if (end_stream) EndBody();  // after the head, or after trailers
}

void Stream::OnDeadline() {
  if (state_ == State::kFailed || state_ == State::kBodyEnded) return;
  nghttp2_session* const library = session_->session_.get();
  const bool sending = state_ == State::kAwaitingHead && request_body_sent_ < request_body_size_;
  const bool window_closed =
      sending && (nghttp2_session_get_stream_remote_window_size(library, id_) <= 0 ||
                  nghttp2_session_get_remote_window_size(library) <= 0);
  SendReset(DeadlineFailure(session_->origin_key_, state_ != State::kAwaitingHead,
                            request_body_sent_, request_body_size_, window_closed));
}

std::string Stream::TakeBody(size_t max_bytes) {
  Session& session = *session_;
  const size_t n = std::min(max_bytes, body_.size());
  std::string bytes(static_cast<const char*>(body_.data().data()), n);
  body_.consume(n);
  if (body_.size() == 0) body_.shrink_to_fit();
  buffered_bytes_ = body_.size();
  session.UpdateBufferStats(-static_cast<int64_t>(n));
  if (session.state_ != Session::State::kEnded) {
    // The stream's window (the connection's reopened as the bytes came).
    const int result = nghttp2_session_consume_stream(session.session_.get(), id_, n);
    if (nghttp2_is_fatal(result)) session.End(session.LibraryFailure(result));
  }
  GrowWindow(n);
  ReleaseSpareWindow();
  return bytes;
}

void Stream::DropBody() {
  const size_t n = body_.size();
  if (n == 0) return;
  body_.consume(n);
  body_.shrink_to_fit();
  buffered_bytes_ = 0;
  session_->UpdateBufferStats(-static_cast<int64_t>(n));
}

absl::Status Stream::ReserveWindow(uint64_t bytes) {
  if (memory_) {
    if (absl::Status refused = memory_->TryReserve(bytes); !refused.ok()) return refused;
  }
  window_ += bytes;
  return absl::OkStatus();
}

void Stream::GrowWindow(uint64_t read) {
  Session& session = *session_;
  if (state_ != State::kBody || session.state_ == Session::State::kEnded) return;
  const uint64_t most = session.limits_.stream_window_bytes;
  const uint64_t more = std::min(read, most - std::min(window_, most));
  if (more == 0) return;
  // nghttp2's own figure, which counts its default window until our SETTINGS are
  // acknowledged and moves with them then: raised by `more`, it sends WINDOW_UPDATE(more).
  const int32_t local =
      nghttp2_session_get_stream_effective_local_window_size(session.session_.get(), id_);
  if (local < 0 || static_cast<uint64_t>(local) + more > NGHTTP2_MAX_WINDOW_SIZE) return;
  // Refused: the window stays as it is, and the server waits for the caller to read.
  if (!ReserveWindow(more).ok()) return;
  const int result = nghttp2_session_set_local_window_size(
      session.session_.get(), NGHTTP2_FLAG_NONE, id_, local + static_cast<int32_t>(more));
  if (result != 0) {
    window_ -= more;
    if (memory_) memory_->Release(more);
    if (nghttp2_is_fatal(result)) session.End(session.LibraryFailure(result));
  }
}

void Stream::ReleaseSpareWindow() {
  if (state_ != State::kBodyEnded && state_ != State::kFailed) return;
  const uint64_t spare = window_ - body_.size();
  if (spare == 0) return;
  window_ -= spare;
  if (memory_) memory_->Release(spare);
}

}  // namespace egress::transport::http2
