#include "service/fetch/fetch_stream_reactor.h"

#include <string>
#include <utility>

#include "service/fetch/fetch_call.h"
#include "service/fetch/grpc_caller_side.h"
#include "service/fetch/stalled_write.h"
#include "service/fetch/stalled_write_watch.h"

namespace egress::fetch {
namespace {

using egress::v1::FetchChunk;
using egress::v1::FetchRequest;

// FetchStream's caller side on gRPC's library server: the head, then body chunks, one
// write at a time. A caller that goes away leaves the rest of the body to auto-drain.
class FetchStreamReactor final : public grpc::ServerWriteReactor<FetchChunk>,
                                 private GrpcCallerSide {
 public:
  FetchStreamReactor(const Context& service, grpc::CallbackServerContext* context,
                     FetchRequest* request)
      : GrpcCallerSide(*context),
        stall_watch_(context),
        call_(FetchCall::Rpc::kFetchStream, *this) {
    call_.Start(service, *request);
  }

  void OnCancel() override { call_.Cancel(); }
  void OnDone() override {
    stall_watch_.Detach();
    call_.Done();
  }

  // ok is false when the caller has gone (or the stall watch cancelled it). A write that
  // completed just as the watch cancelled the RPC ends it all the same: the caller sees
  // CANCELLED either way, and so the count and the log agree.
  void OnWriteDone(bool ok) override {
    const bool stalled = stall_watch_.WriteDone();
    if (stalled) return call_.OnSent(StalledWrite());
    if (!ok) return call_.OnSent(absl::CancelledError("the caller went away"));
    call_.OnSent(absl::OkStatus());
  }

 private:
  egress::v1::FetchResponse& Response() override { return *chunk_.mutable_head(); }
  void SendHead() override {
    stall_watch_.Arm(call_.deadline());
    Write();
  }
  void SendBody(std::string bytes) override {
    chunk_.set_body(std::move(bytes));
    Write();
  }
  void Finish(const grpc::Status& status) override {
    grpc::ServerWriteReactor<FetchChunk>::Finish(status);
  }
  void Release() override { delete this; }

  void Write() {
    if (!stall_watch_.WriteStarting()) return call_.OnSent(StalledWrite());
    StartWrite(&chunk_);
  }

  FetchChunk chunk_;  // the message being written; one write at a time
  StalledWriteWatch stall_watch_;
  FetchCall call_;
};

}  // namespace

grpc::ServerWriteReactor<FetchChunk>* NewFetchStreamReactor(const Context& service,
                                                             grpc::CallbackServerContext* context,
                                                             FetchRequest* request) {
  return new FetchStreamReactor(service, context, request);
}

}  // namespace egress::fetch
