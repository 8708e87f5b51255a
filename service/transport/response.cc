#include "service/transport/response.h"

#include <mutex>
#include <utility>

#include "absl/base/thread_annotations.h"

namespace egress::transport {

struct ResponseBody::State {
  State(UpstreamExchange exchange, absl::Time deadline, BodySettler& settler)
      : exchange(std::move(exchange)), deadline(deadline), settler(settler) {}

  UpstreamExchange exchange;  // its connection, or its stream
  const absl::Time deadline;
  BodySettler& settler;
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

ResponseBody::ResponseBody(UpstreamExchange exchange, absl::Time deadline,
                           BodySettler& settler)
    : state_(std::make_shared<State>(std::move(exchange), deadline, settler)) {}

ResponseBody::~ResponseBody() { Close(); }

void ResponseBody::Read(size_t max_bytes, Connection::ReadCallback done) {
  bool ended;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    ended = state_->released || state_->closed;
    state_->reading = !ended;
  }
  if (ended) return done(std::string());
  state_->exchange.ReadBody(
      max_bytes, state_->deadline,
      [state = state_, done = std::move(done)](absl::StatusOr<std::string> bytes,
                                               bool body_ended) {
        // Ended with these bytes, the caller's next Read ends at once, and the connection
        // (or the stream) is given back meanwhile.
        bool aborted;
        if (!state->AfterRead(bytes, body_ended, &aborted)) return done(std::move(bytes));
        state->exchange.Settle(state->settler, /*read_failed=*/!bytes.ok(), /*let_go=*/aborted,
                               state->TakeSettled());
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
    if (state_->reading) {
      // The read in flight ends soon (see UpstreamExchange::CutReadShort), and its
      // callback settles: nothing waits on a slow upstream for long.
      state_->exchange.CutReadShort(state_->settler);
      return;
    }
    state_->released = true;
  }
  state_->exchange.Settle(state_->settler, /*read_failed=*/false, /*let_go=*/false,
                          state_->TakeSettled());
}

void ResponseBody::OnSettled(SettledCallback settled) {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->settled = std::move(settled);
}

}  // namespace egress::transport
