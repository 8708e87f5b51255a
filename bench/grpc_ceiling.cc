// The gRPC ceiling of bench/run.py: egress.v1.Egress whose Fetch answers a fixed 1 KiB
// response at once, without any I/O, on the same callback API and the same gRPC library
// as egressd. No gRPC-fronted service beats it on this machine; egressd's ratio to it is
// what its transport costs.
//
//   grpc_ceiling --listen=127.0.0.1:50061
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "egress/v1/egress.grpc.pb.h"
#include "grpcpp/grpcpp.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:50061", "address to serve gRPC on");

namespace {

class FixedResponse final : public egress::v1::Egress::CallbackService {
 public:
  FixedResponse() {
    response_.set_status_code(200);
    auto* header = response_.add_headers();
    header->set_name("Content-Type");
    header->set_value("application/octet-stream");
    response_.set_body(std::string(1024, 'x'));
  }

  grpc::ServerUnaryReactor* Fetch(grpc::CallbackServerContext* context,
                                  const egress::v1::FetchRequest*,
                                  egress::v1::FetchResponse* response) override {
    *response = response_;
    auto* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

 private:
  egress::v1::FetchResponse response_;
};

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  FixedResponse service;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(absl::GetFlag(FLAGS_listen), grpc::InsecureServerCredentials());
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) return 1;
  server->Wait();  // until killed
  return 0;
}
