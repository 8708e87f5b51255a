#include "service/fetch/fetch_service.h"

#include "service/fetch/fetch_reactor.h"
#include "service/fetch/fetch_stream_reactor.h"

namespace egress {
namespace {

using egress::v1::FetchChunk;
using egress::v1::FetchRequest;
using egress::v1::FetchResponse;

// gRPC's callback handlers build the request as a mutable object the call owns and lend
// it as const (grpcpp/impl/codegen/server_callback_handlers.h; the unary one hands the
// same object out mutable through GetRpcAllocatorState). Egress moves the body out of it
// rather than hold a second copy of up to limits.max_request_body_bytes per call.
FetchRequest* OwnedRequest(const FetchRequest* request) {
  return const_cast<FetchRequest*>(request);
}

}  // namespace

grpc::ServerUnaryReactor* FetchService::Fetch(grpc::CallbackServerContext* context,
                                              const FetchRequest* request,
                                              FetchResponse* response) {
  return fetch::NewFetchReactor(context_, context, OwnedRequest(request), response);
}

grpc::ServerWriteReactor<FetchChunk>* FetchService::FetchStream(
    grpc::CallbackServerContext* context, const FetchRequest* request) {
  return fetch::NewFetchStreamReactor(context_, context, OwnedRequest(request));
}

}  // namespace egress
