#ifndef EGRESS_SERVICE_FETCH_FETCH_REACTOR_H_
#define EGRESS_SERVICE_FETCH_FETCH_REACTOR_H_

// The unary Fetch call: its gRPC reactor reads the body per body_mode, then answers.

#include "egress/v1/egress.pb.h"
#include "grpcpp/support/server_callback.h"
#include "service/fetch/fetch_context.h"

namespace grpc {
class CallbackServerContext;
}  // namespace grpc

namespace egress::fetch {

// A reactor for one Fetch call; gRPC owns it and it deletes itself when done.
grpc::ServerUnaryReactor* NewFetchReactor(const Context& service,
                                          grpc::CallbackServerContext* context,
                                          egress::v1::FetchRequest* request,
                                          egress::v1::FetchResponse* response);

}  // namespace egress::fetch

#endif  // EGRESS_SERVICE_FETCH_FETCH_REACTOR_H_
