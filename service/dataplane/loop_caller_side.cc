#include "service/dataplane/loop_caller_side.h"

#include <memory>
#include <string>
#include <utility>

#include "boost/asio/dispatch.hpp"
#include "boost/asio/post.hpp"
#include "service/base/error_reason.h"
#include "service/fetch/caller_side.h"
#include "service/fetch/certificate_names.h"
#include "service/fetch/fetch_call.h"
#include "service/fetch/inline_arena.h"
#include "service/fetch/stalled_write.h"
#include "service/fetch/status_mapping.h"

namespace egress::dataplane {
namespace {

// One Fetch's or FetchStream's caller side on a ServerSession. FetchCall calls it from any
// thread (the transport answers on its own loops); each call into the session is posted
// to the session's loop, where the stream lives, and so is the caller side's own end.
class LoopCallerSide final : public fetch::CallerSide, private StreamWatcher {
 public:
  LoopCallerSide(fetch::FetchCall::Rpc rpc, std::shared_ptr<ServerSession> session,
                 IncomingCall call)
      : rpc_(rpc),
        session_(std::move(session)),
        call_(std::move(call)),
        first_(arena_.Create<egress::v1::FetchChunk>()),
        fetch_(rpc, *this) {}

  // On the loop: watches the stream, then starts the fetch (which may finish at once).
  void Start(const fetch::Context& service, egress::v1::FetchRequest& request) {
    session_->Watch(call_.stream_id, this);
    fetch_.Start(service, request);
  }

 private:
  friend std::default_delete<LoopCallerSide>;
  ~LoopCallerSide() { session_->Unwatch(call_.stream_id); }  // on the loop

  std::string Peer() const override { return session_->peer(); }
  absl::InlinedVector<absl::string_view, 1> Metadata(absl::string_view key) const override {
    absl::InlinedVector<absl::string_view, 1> values;
    for (const auto& [name, value] : call_.metadata) {
      if (name == key) values.emplace_back(value);
    }
    return values;
  }
  // Named as gRPC's library server names it (fetch/certificate_names.h); none without mTLS.
  std::string CertificateName(egress::v1::IdentitySource source) const override {
    return fetch::CertificateName(session_->certificate(), source);
  }
  absl::Time Deadline() const override { return call_.deadline; }

  egress::v1::FetchResponse& Response() override { return *first_.mutable_head(); }
  // FetchStream: the head, then each body chunk, one message at a time; OnSent once the
  // session's nghttp2 has taken it (the caller's window let it), so a caller that stops
  // reading holds back its own fetch only, and past the fetch's deadline not even that.
  void SendHead() override {
    const absl::Time stalled_at = fetch_.deadline() + fetch::kStalledWriteGrace;
    boost::asio::post(session_->executor(), [this, stalled_at] {
      session_->ResetIfStalledAt(call_.stream_id, stalled_at, fetch::StalledWrite());
    });
    Send(first_);
  }
  void SendBody(std::string bytes) override {
    body_chunk_.set_body(std::move(bytes));
    Send(body_chunk_);
  }
  void Send(const egress::v1::FetchChunk& chunk) {
    std::string message;
    chunk.SerializeToString(&message);
    boost::asio::post(session_->executor(), [this, message = std::move(message)]() mutable {
      session_->Send(call_.stream_id, std::move(message),
                     [this](absl::Status taken) { fetch_.OnSent(std::move(taken)); });
    });
  }

  // Fetch: FetchCall touches the response no more; it is serialized here, on whichever
  // thread finishes the call, and the loop sends it: at once when this is the loop (a
  // pooled fetch's answer comes on its own loop; the session queues what it is asked to
  // send inside its own callbacks), else posted to it. Done follows once nghttp2 has
  // taken the answer's last byte, or the stream went (gRPC's OnDone, after the send):
  // until then the call counts in flight and its body stays in the budget.
  void Finish(const grpc::Status& status) override {
    std::string message;
    if (rpc_ == fetch::FetchCall::Rpc::kFetch && status.ok()) {
      first_.head().SerializeToString(&message);
    }
    boost::asio::dispatch(session_->executor(),
                          [this, status, message = std::move(message)]() mutable {
                            const auto done = [this] { fetch_.Done(); };
                            if (rpc_ == fetch::FetchCall::Rpc::kFetch && status.ok()) {
                              session_->Answer(call_.stream_id, std::move(message), status, done);
                            } else {
                              session_->Finish(call_.stream_id, status, done);
                            }
                          });
  }
  // Freed on the loop, where the stream it watches lives; freed with the loop's pending
  // handlers if the loop stops first.
  void Release() override {
    boost::asio::post(session_->executor(),
                      [owned = std::unique_ptr<LoopCallerSide>(this)] {});
  }

  void OnStreamReset() override { fetch_.Cancel(); }

  const fetch::FetchCall::Rpc rpc_;
  const std::shared_ptr<ServerSession> session_;
  const IncomingCall call_;
  // The answer's head (Fetch's whole answer; FetchStream's first message), on the call's
  // own arena (fetch/inline_arena.h): its headers and timings cost no malloc each.
  InlineArena<2048> arena_;
  egress::v1::FetchChunk& first_;
  // FetchStream's body chunks, one at a time: on the heap, for an arena would keep each.
  egress::v1::FetchChunk body_chunk_;
  fetch::FetchCall fetch_;
};

}  // namespace

void StartFetch(fetch::FetchCall::Rpc rpc, const fetch::Context& service,
                const std::shared_ptr<ServerSession>& session, IncomingCall call) {
  // The request lives while the fetch starts only, on an arena of its own: FetchCall
  // takes what it keeps (the body moved, the URL copied), and whatever else a caller
  // padded the message with (unknown fields) goes now, not when the call ends.
  InlineArena<2048> arena;
  auto& request = arena.Create<egress::v1::FetchRequest>();
  if (!request.ParseFromString(call.message)) {
    service.observer.OnCallRefused(CallRefusal::kBadRequestMessage);
    return session->Answer(
        call.stream_id, std::nullopt,
        ToGrpcStatus(transport::WithReason(
            absl::InvalidArgumentError("the request message is not an egress.v1.FetchRequest"),
            "REQUEST_MESSAGE_UNREADABLE")));
  }
  std::string().swap(call.message);  // the parsed request holds the body now
  // Owned by itself from here: freed by Release, once FetchCall is done with it.
  (new LoopCallerSide(rpc, session, std::move(call)))->Start(service, request);
}

}  // namespace egress::dataplane
