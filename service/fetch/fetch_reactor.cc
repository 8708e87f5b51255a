#include "service/fetch/fetch_reactor.h"

#include "service/fetch/fetch_call.h"
#include "service/fetch/grpc_caller_side.h"

namespace egress::fetch {
namespace {

using egress::v1::FetchRequest;
using egress::v1::FetchResponse;

// Fetch's caller side on gRPC's library server: one answer, the FetchResponse gRPC gave.
class FetchReactor final : public grpc::ServerUnaryReactor, private GrpcCallerSide {
 public:
  FetchReactor(const Context& service, grpc::CallbackServerContext* context,
               FetchRequest* request, FetchResponse* response)
      : GrpcCallerSide(*context), response_(*response), call_(FetchCall::Rpc::kFetch, *this) {
    call_.Start(service, *request);
  }

  void OnCancel() override { call_.Cancel(); }
  void OnDone() override { call_.Done(); }
  // Both reactions are short and never wait (a lock held for a few lines, a post to an
  // I/O thread), so gRPC may run them on the thread that ends the call instead of
  // waking its executor for them: one thread hand-off less per fetch (issue 15).
  bool InternalInlineable() override { return true; }

 private:
  egress::v1::FetchResponse& Response() override { return response_; }
  // A unary answer is sent whole, by Finish.
  void SendHead() override {}
  void SendBody(std::string) override {}
  void Finish(const grpc::Status& status) override { grpc::ServerUnaryReactor::Finish(status); }
  void Release() override { delete this; }

  FetchResponse& response_;  // gRPC's, on the call's arena
  FetchCall call_;
};

}  // namespace

grpc::ServerUnaryReactor* NewFetchReactor(const Context& service,
                                          grpc::CallbackServerContext* context,
                                          FetchRequest* request, FetchResponse* response) {
  return new FetchReactor(service, context, request, response);
}

}  // namespace egress::fetch
