#include "service/transport/http2/stream.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "boost/asio/post.hpp"
#include "service/base/error_reason.h"
#include "service/transport/http2/session.h"

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
      session.ResetStream(*self, WithReason(absl::CancelledError(absl::StrCat(
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
    if (!head_) return done(Session::ForCaller(failure_));
    ResponseHead head = std::move(*head_);
    head_.reset();
    done(std::move(head));
  }
  if (!read_done_) return;
  if (state_ == State::kFailed) {
    return std::exchange(read_done_, nullptr)(Session::ForCaller(failure_));
  }
  if (body_.size() > 0) {
    std::string bytes = session_->TakeBody(*this, read_max_);
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
    self->session_->Guard([&] { self->session_->OnStreamDeadline(*self); });
  });
}

}  // namespace egress::transport::http2
