#ifndef EGRESS_FUZZ_IN_PROCESS_EGRESS_H_
#define EGRESS_FUZZ_IN_PROCESS_EGRESS_H_

#include <memory>

#include "absl/status/status.h"
#include "egress/v1/egress.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "service/access_log/access_log.h"
#include "service/config/config.h"
#include "service/config/config_store.h"
#include "service/fetch/fetch_service.h"
#include "tests/support/counting_observer.h"

namespace egress::fuzz {

// egress's Fetch front end over its transport, in the fuzzer's own process, called through
// an in-process channel. A fuzzer starts one and never tears it down.
struct InProcessEgress {
  std::unique_ptr<ConfigStore> config;
  std::unique_ptr<transport::Transport> transport;
  std::unique_ptr<FetchService> service;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<v1::Egress::Stub> stub;
};

// Starts `egress` under `proto`, reporting to `observer` and logging to `log` (null: no
// access log); the error when the config is refused or a part does not start.
inline absl::Status StartInProcessEgress(const v1::Config& proto,
                                         testing::CountingObserver& observer, AccessLog* log,
                                         InProcessEgress& egress) {
  auto config = BuildConfig(proto);
  if (!config.ok()) return config.status();
  auto transport = transport::Transport::Create(config->transport, observer);
  if (!transport.ok()) return transport.status();
  egress.transport = *std::move(transport);
  egress.config = std::make_unique<ConfigStore>(*std::move(config));
  egress.service = std::make_unique<FetchService>(*egress.transport, *egress.config, observer, log);
  grpc::ServerBuilder builder;
  builder.RegisterService(egress.service.get());
  egress.server = builder.BuildAndStart();
  if (!egress.server) return absl::UnavailableError("the gRPC server did not start");
  egress.stub = v1::Egress::NewStub(egress.server->InProcessChannel(grpc::ChannelArguments()));
  return absl::OkStatus();
}

}  // namespace egress::fuzz

#endif  // EGRESS_FUZZ_IN_PROCESS_EGRESS_H_
