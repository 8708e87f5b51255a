// egressd: the gRPC egress service. The only place that reads flags.
#include <csignal>
#include <iostream>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "prometheus/exposer.h"
#include "service/config.h"
#include "service/metrics.h"
#include "service/server.h"

ABSL_FLAG(std::string, grpc_listen, "127.0.0.1:50051", "address:port for the Egress gRPC service");
ABSL_FLAG(std::string, metrics_listen, "127.0.0.1:9464",
          "address:port serving Prometheus metrics at /metrics");
ABSL_FLAG(std::string, config, "",
          "text-format egress.v1.Config file; built-in defaults serve when empty");
ABSL_FLAG(absl::Duration, shutdown_grace, absl::Seconds(10),
          "how long in-flight fetches may take to finish after SIGTERM or SIGINT");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("egressd: fetches URLs for gRPC callers over one pooled transport");
  absl::ParseCommandLine(argc, argv);

  // Block the stop signals before any thread starts, so that only sigwait sees them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  absl::StatusOr<egress::ServiceConfig> config =
      absl::GetFlag(FLAGS_config).empty() ? egress::BuildConfig(egress::v1::Config())
                                          : egress::LoadConfigFile(absl::GetFlag(FLAGS_config));
  if (!config.ok()) {
    std::cerr << "egressd: invalid config: " << config.status().message() << "\n";
    return 2;
  }

  auto metrics = std::make_shared<egress::Metrics>(config->max_origin_labels);
  std::unique_ptr<prometheus::Exposer> exposer;
  try {
    exposer = std::make_unique<prometheus::Exposer>(absl::GetFlag(FLAGS_metrics_listen));
  } catch (const std::exception& e) {
    std::cerr << "egressd: cannot serve metrics on " << absl::GetFlag(FLAGS_metrics_listen)
              << ": " << e.what() << "\n";
    return 1;
  }
  exposer->RegisterCollectable(metrics);
  auto server = egress::EgressServer::Start(*config, absl::GetFlag(FLAGS_grpc_listen), *metrics,
                                           *metrics);
  if (!server.ok()) {
    std::cerr << "egressd: " << server.status().message() << "\n";
    return 1;
  }
  std::cout << "egressd: serving Egress on " << absl::GetFlag(FLAGS_grpc_listen)
            << ", metrics on http://" << absl::GetFlag(FLAGS_metrics_listen)
            << "/metrics; config: " << egress::DescribeConfig(*config) << std::endl;

  int signal = 0;
  sigwait(&stop_signals, &signal);
  std::cout << "egressd: signal " << signal << ", shutting down" << std::endl;
  (*server)->Shutdown(absl::GetFlag(FLAGS_shutdown_grace));
  return 0;
}
