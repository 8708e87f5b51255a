#ifndef EGRESS_SERVICE_FETCH_FETCH_STREAM_REACTOR_H_
#define EGRESS_SERVICE_FETCH_FETCH_STREAM_REACTOR_H_

// The server-streaming FetchStream call: its gRPC reactor writes the head, then body
// chunks as fast as the caller takes them.

#include "egress/v1/egress.pb.h"
#include "grpcpp/support/server_callback.h"
#include "service/fetch/fetch_context.h"

namespace grpc {
class CallbackServerContext;
}  // namespace grpc

namespace egress::fetch {

// A reactor for one FetchStream call; gRPC owns it and it deletes itself when done.
grpc::ServerWriteReactor<egress::v1::FetchChunk>* NewFetchStreamReactor(
    const Context& service, grpc::CallbackServerContext* context,
    egress::v1::FetchRequest* request);

}  // namespace egress::fetch

#endif  // EGRESS_SERVICE_FETCH_FETCH_STREAM_REACTOR_H_
