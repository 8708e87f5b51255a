#include "service/dataplane/loop_caller_side.h"

#include <string>
#include <utility>

#include "boost/asio/post.hpp"
#include "service/base/error_reason.h"
#include "service/fetch/caller_side.h"
#include "service/fetch/fetch_call.h"
#include "service/fetch/status_mapping.h"

namespace egress::dataplane {
namespace {

// One Fetch's caller side on a ServerSession. FetchCall calls it from any thread (the
// transport answers on its own loops); each call into the session is posted to the
// session's loop, where the stream lives, and so is the caller side's own end.
class LoopCallerSide final : public fetch::CallerSide, private StreamWatcher {
 public:
  LoopCallerSide(std::shared_ptr<ServerSession> session, IncomingCall call)
      : session_(std::move(session)),
        call_(std::move(call)),
        fetch_(fetch::FetchCall::Rpc::kFetch, *this) {}

  // On the loop: watches the stream, then starts the fetch (which may finish at once).
  void Start(const fetch::Context& service, egress::v1::FetchRequest& request) {
    session_->Watch(call_.stream_id, this);
    fetch_.Start(service, request);
  }

 private:
  ~LoopCallerSide() { session_->Unwatch(call_.stream_id); }  // on the loop

  std::string Peer() const override { return session_->peer(); }
  absl::InlinedVector<absl::string_view, 1> Metadata(absl::string_view key) const override {
    absl::InlinedVector<absl::string_view, 1> values;
    for (const auto& [name, value] : call_.metadata) {
      if (name == key) values.emplace_back(value);
    }
    return values;
  }
  // Cleartext callers only, so far: no certificate names a caller.
  std::string CertificateName(egress::v1::IdentitySource) const override { return ""; }
  absl::Time Deadline() const override { return call_.deadline; }

  egress::v1::FetchResponse& Response() override { return response_; }
  // A unary answer is sent whole, by Finish.
  void SendHead() override {}
  void SendBody(std::string) override {}

  // FetchCall touches the response no more: it is serialized here, on whichever thread
  // finishes the call, and the loop sends it. Done follows once the answer is handed to
  // the session (gRPC's OnDone).
  void Finish(const grpc::Status& status) override {
    std::string message;
    if (status.ok()) response_.SerializeToString(&message);
    boost::asio::post(session_->executor(),
                      [this, status, message = std::move(message)] {
                        session_->Answer(call_.stream_id, status.ok() ? &message : nullptr,
                                         status);
                        fetch_.Done();
                      });
  }
  // Freed on the loop, where the stream it watches lives; freed with the loop's pending
  // handlers if the loop stops first.
  void Release() override {
    boost::asio::post(session_->executor(),
                      [owned = std::unique_ptr<LoopCallerSide>(this)] {});
  }

  void OnStreamReset() override { fetch_.Cancel(); }

  friend std::default_delete<LoopCallerSide>;

  const std::shared_ptr<ServerSession> session_;
  const IncomingCall call_;
  egress::v1::FetchResponse response_;
  fetch::FetchCall fetch_;
};

}  // namespace

void StartFetch(const fetch::Context& service, const std::shared_ptr<ServerSession>& session,
                IncomingCall call, SessionCounts& counts) {
  egress::v1::FetchRequest request;
  if (!request.ParseFromString(call.message)) {
    counts.bad_request_message.fetch_add(1, std::memory_order_relaxed);
    return session->Answer(
        call.stream_id, nullptr,
        ToGrpcStatus(transport::WithReason(
            absl::InvalidArgumentError("the request message is not an egress.v1.FetchRequest"),
            "REQUEST_MESSAGE_UNREADABLE")));
  }
  call.message.clear();
  // Owned by itself from here: freed by Release, once FetchCall is done with it.
  (new LoopCallerSide(session, std::move(call)))->Start(service, request);
}

}  // namespace egress::dataplane
