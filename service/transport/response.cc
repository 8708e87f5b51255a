#include "service/transport/response.h"

#include <mutex>
#include <utility>

#include "absl/base/thread_annotations.h"

namespace egress::transport {

struct ResponseBody::State {
  BodySettler* settler = nullptr;
  std::shared_ptr<Connection> connection;
  std::shared_ptr<http2::Stream> stream;  // HTTP/2: the body is this stream's
  absl::Time deadline;
  std::mutex mu;
  bool reading ABSL_GUARDED_BY(mu) = false;
  bool closed ABSL_GUARDED_BY(mu) = false;    // the caller let go
  bool released ABSL_GUARDED_BY(mu) = false;  // the connection went back to the transport
  SettledCallback settled ABSL_GUARDED_BY(mu);

  SettledCallback TakeSettled() {
    std::lock_guard<std::mutex> lock(mu);
    return std::exchange(settled, nullptr);
  }

  // A read's end: whether the body is done with (it ended, with these bytes or none,
  // failed, or was let go of while the read was under way), and in `aborted` whether it
  // was let go of.
  bool AfterRead(const absl::StatusOr<std::string>& bytes, bool body_ended, bool* aborted) {
    std::lock_guard<std::mutex> lock(mu);
    reading = false;
    *aborted = closed;
    const bool release = closed || !bytes.ok() || bytes->empty() || body_ended;
    released = released || release;
    return release;
  }
};

ResponseBody::ResponseBody(std::shared_ptr<Connection> connection,
                           std::shared_ptr<http2::Stream> stream, absl::Time deadline,
                           BodySettler& settler)
    : state_(std::make_shared<State>()) {
  state_->settler = &settler;
  state_->connection = std::move(connection);
  state_->stream = std::move(stream);
  state_->deadline = deadline;
}

ResponseBody::~ResponseBody() { Close(); }

void ResponseBody::Read(size_t max_bytes, Connection::ReadCallback done) {
  bool ended;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    ended = state_->released || state_->closed;
    state_->reading = !ended;
  }
  if (ended) return done(std::string());
  if (state_->stream) return ReadStream(max_bytes, std::move(done));
  state_->connection->ReadBody(
      max_bytes, state_->deadline,
      [state = state_, done = std::move(done)](absl::StatusOr<std::string> bytes) {
        // Ended with these bytes, the caller's next Read ends at once, and the connection
        // is reused meanwhile.
        bool aborted;
        if (!state->AfterRead(bytes, state->connection->BodyEnded(), &aborted)) {
          return done(std::move(bytes));
        }
        if (aborted && !bytes.ok()) {
          // Cut short after Close: the connection closed under the read.
          state->settler->FinishCancelled(state->connection, state->TakeSettled());
        } else {
          state->settler->FinishResponse(state->connection, state->TakeSettled());
        }
        if (aborted) bytes = absl::CancelledError("the response body was closed during a read");
        done(std::move(bytes));
      });
}

void ResponseBody::ReadStream(size_t max_bytes, Connection::ReadCallback done) {
  state_->stream->Read(
      max_bytes, state_->deadline,
      [state = state_, done = std::move(done)](absl::StatusOr<std::string> bytes) {
        bool aborted;
        if (!state->AfterRead(bytes, state->stream->BodyEnded(), &aborted)) {
          return done(std::move(bytes));
        }
        state->settler->FinishStream(state->connection, *state->stream,
                                     /*failed=*/!bytes.ok() && !aborted, state->TakeSettled());
        if (aborted) bytes = absl::CancelledError("the response body was closed during a read");
        done(std::move(bytes));
      });
}

void ResponseBody::Close() {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (state_->closed) return;
    state_->closed = true;
    if (state_->released) return;
    if (state_->reading && state_->stream) {
      // The stream is reset now (nothing waits for a drain on HTTP/2): the read in
      // flight ends CANCELLED, and its callback gives the stream back.
      state_->stream->Reset();
      return;
    }
    if (state_->reading) {
      // The read in flight may finish within the drain's time cap, and the rest drain
      // as usual; if not, the connection closes under it. Either way its callback
      // releases the connection, and nothing waits on a slow upstream for long.
      const auto& connection = state_->connection;
      const DrainSettings drain = state_->settler->DrainFor(connection->origin().host);
      connection->CutReadShortAfter(drain.mode == DrainMode::kOff ? absl::ZeroDuration()
                                                                  : drain.max_duration);
      return;
    }
    state_->released = true;
  }
  if (state_->stream) {
    return state_->settler->FinishStream(state_->connection, *state_->stream, /*failed=*/false,
                                         state_->TakeSettled());
  }
  state_->settler->FinishResponse(state_->connection, state_->TakeSettled());
}

void ResponseBody::OnSettled(SettledCallback settled) {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->settled = std::move(settled);
}

}  // namespace egress::transport
