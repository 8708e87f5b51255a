// egressd: the gRPC egress service. The only place that reads flags.
#include <sys/resource.h>

#include <csignal>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "prometheus/exposer.h"
#include "service/access_log/access_log.h"
#include "service/admin/admin_server.h"
#include "service/base/log_text.h"
#include "service/config/config.h"
#include "service/server/config_reloader.h"
#include "service/server/memory_releaser.h"
#include "service/metrics/metrics.h"
#include "service/metrics/process_metrics.h"
#include "service/server/server_credentials.h"
#include "service/server/server.h"
#include "service/admin/token_file.h"

ABSL_FLAG(std::string, grpc_listen, "127.0.0.1:50051", "address:port for the Egress gRPC service");
ABSL_FLAG(std::string, grpc_tls_cert, "", "PEM certificate: serve Egress over TLS");
ABSL_FLAG(std::string, grpc_tls_key, "", "PEM private key for --grpc_tls_cert");
ABSL_FLAG(std::string, grpc_tls_client_ca, "",
          "PEM CA for callers' certificates: require mTLS and identify callers by them");
ABSL_FLAG(absl::Duration, grpc_max_connection_age, egress::ConnectionAge().max_age,
          "a caller's gRPC connection gets GOAWAY after this long (+/-10 % jitter), so that "
          "clients reconnect and spread over replicas that joined since; 0 never");
ABSL_FLAG(absl::Duration, grpc_max_connection_age_grace, egress::ConnectionAge().grace,
          "how long calls under way may take to finish on a connection past "
          "--grpc_max_connection_age before it is closed (the default is "
          "limits.max_timeout's, so no fetch is cut short before its deadline)");
ABSL_FLAG(absl::Duration, grpc_max_connection_idle, egress::ConnectionAge().max_idle,
          "a caller's gRPC connection with no call open for this long gets GOAWAY (calls "
          "that start meanwhile get --grpc_max_connection_age_grace); 0 never");
ABSL_FLAG(std::string, data_plane, "loops",
          "what serves Egress, health and reflection on --grpc_listen: loops (egressd's own "
          "HTTP/2 gRPC server on the transport's event loops, where each fetch's upstream I/O "
          "runs too) or grpc_library (gRPC's library server, the reference and a fallback)");
ABSL_FLAG(uint32_t, grpc_max_connections, egress::dataplane::CallerLimits().max_connections,
          "with --data_plane=loops: caller connections open at once; past it a new "
          "connection takes the slot of the oldest that sent no client preface within 1 s "
          "(closed, counted preface_evicted), else of the one with no call open for "
          "longest, at least 10 s (idle_evicted), or is closed as it is accepted (counted "
          "too_many_connections)");
ABSL_FLAG(uint32_t, grpc_max_connections_per_source,
          egress::dataplane::CallerLimits().max_connections_per_source,
          "with --data_plane=loops: of --grpc_max_connections, the most from one source (an "
          "IPv4 address or an IPv6 /64), so that one host cannot hold every slot; past it a "
          "new connection from that source is closed as it is accepted (too_many_connections)");
ABSL_FLAG(std::string, admin_listen, "127.0.0.1:50052",
          "address:port for the TransportAdmin gRPC service; a non-loopback address needs "
          "--admin_token_file or the --admin_tls_* flags");
ABSL_FLAG(std::string, admin_token_file, "",
          "file holding a bearer token the admin service requires (authorization: Bearer ...); "
          "read again when it changes; off loopback only with --admin_tls_cert/_key");
ABSL_FLAG(std::vector<std::string>, admin_identities, {},
          "comma-separated mTLS identities allowed to call the admin service (a client "
          "certificate's URI SAN, e.g. spiffe://..., or DNS SAN); required with "
          "--admin_tls_client_ca unless --admin_token_file is set");
ABSL_FLAG(bool, admin_allow_policy_off, false,
          "let UpdateConfig turn the egress policy off (policy.disabled), allow every "
          "address (policy.allow_cidrs covering 0.0.0.0/0 or ::/0), trust every peer's "
          "caller_header (policy.caller_header_trusted_peers likewise) or let unknown "
          "callers in again (policy.unknown_callers no longer UNKNOWN_CALLERS_DENY)");
ABSL_FLAG(std::string, admin_tls_cert, "", "PEM certificate of the admin listener (mTLS)");
ABSL_FLAG(std::string, admin_tls_key, "", "PEM private key of the admin listener (mTLS)");
ABSL_FLAG(std::string, admin_tls_client_ca, "",
          "PEM CA that admin clients' certificates must chain to (mTLS)");
ABSL_FLAG(std::string, metrics_listen, "127.0.0.1:9464",
          "address:port serving Prometheus metrics at /metrics");
ABSL_FLAG(std::string, access_log, "-",
          "where the access log's JSON lines go: - (standard output), a file to append to, "
          "or off");
ABSL_FLAG(std::string, config, "",
          "text-format egress.v1.Config file, applied again when it changes and on SIGHUP; "
          "built-in defaults serve when empty");
ABSL_FLAG(absl::Duration, config_poll, absl::Seconds(1),
          "how often the --config file is checked for changes");
ABSL_FLAG(bool, check_config, false,
          "validate the --config file, print the config in force and exit (0 valid, 2 not)");
ABSL_FLAG(absl::Duration, memory_release_interval, absl::Seconds(10),
          "how often egressd looks whether to give unused heap back to the system (after a "
          "burst of fetches glibc keeps it otherwise); 0 never");
ABSL_FLAG(absl::Duration, shutdown_grace, absl::Seconds(10),
          "how long in-flight fetches may take to finish after SIGTERM or SIGINT");

namespace {

// A message may quote the config (a field's value): one bounded, escaped line.
int Fail(const std::string& message) {
  std::cerr << egress::OneLogLine(absl::StrCat("egressd: ", message)) << "\n";
  return 2;
}

// Raises the soft limit of open descriptors to the hard one, as Go's runtime and nginx's
// worker_rlimit_nofile do: a soft limit of 1,024 (systemd's and many shells' default) would
// refuse callers, upstream connections and the /metrics scrape alike once egressd holds
// that many, exactly when it is busiest. process_max_fds shows the limit in force.
void RaiseDescriptorLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  const rlim_t soft = limit.rlim_cur;
  limit.rlim_cur = limit.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
    std::cerr << "egressd: warning: cannot raise the open-file limit to " << limit.rlim_max
              << "; it stays " << soft << std::endl;
  }
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("egressd: fetches URLs for gRPC callers over one pooled transport");
  absl::ParseCommandLine(argc, argv);
  // Debian's Abseil checks every absl::Mutex acquisition (gRPC's locks) for lock-order
  // cycles, a debugging aid that cost a few percent of egressd's CPU in the benchmark.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);

  RaiseDescriptorLimit();
  // A reader that goes away (the access log's pipe) is an error to handle, not an exit.
  signal(SIGPIPE, SIG_IGN);
  // Block the signals before any thread starts, so that only sigwait sees them.
  sigset_t signals;
  sigemptyset(&signals);
  for (int signal : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&signals, signal);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  const std::string config_path = absl::GetFlag(FLAGS_config);
  std::string config_text;
  if (!config_path.empty()) {
    auto text = egress::ReadConfigFile(config_path);
    if (!text.ok()) return Fail(absl::StrCat("--config: ", text.status().message()));
    config_text = *std::move(text);
  }
  absl::StatusOr<egress::ServiceConfig> config =
      config_path.empty() ? egress::BuildConfig(egress::v1::Config())
                          : egress::LoadConfigText(config_text, config_path);
  if (!config.ok()) return Fail(absl::StrCat("invalid config: ", config.status().message()));
  for (const std::string& warning : egress::ConfigWarnings(*config)) {
    std::cerr << egress::OneLogLine(absl::StrCat("egressd: warning: ", warning)) << std::endl;
  }
  if (absl::GetFlag(FLAGS_check_config)) {
    std::cout << egress::DescribeConfig(*config) << std::endl;
    return 0;
  }

  const std::string admin_token_file = absl::GetFlag(FLAGS_admin_token_file);
  if (!admin_token_file.empty()) {
    // Watched and read again once it changes; checked here so a typo fails now.
    auto token = egress::TokenFile::Read(admin_token_file);
    if (!token.ok()) return Fail(std::string(token.status().message()));
  }

  // Every flag is checked before anything listens: a refused combination starts nothing.
  const egress::AdminOptions admin_options{
      absl::GetFlag(FLAGS_admin_listen),
      "",
      {absl::GetFlag(FLAGS_admin_tls_cert), absl::GetFlag(FLAGS_admin_tls_key),
       absl::GetFlag(FLAGS_admin_tls_client_ca)},
      admin_token_file,
      absl::GetFlag(FLAGS_admin_identities),
      absl::GetFlag(FLAGS_admin_allow_policy_off)};
  if (auto admin = egress::CheckAdminOptions(admin_options); !admin.ok()) {
    return Fail(std::string(admin.message()));
  }
  const egress::ConnectionAge connection_age{absl::GetFlag(FLAGS_grpc_max_connection_age),
                                             absl::GetFlag(FLAGS_grpc_max_connection_age_grace),
                                             absl::GetFlag(FLAGS_grpc_max_connection_idle)};
  if (auto age = egress::CheckConnectionAge(connection_age); !age.ok()) {
    return Fail(std::string(age.message()));
  }
  const auto data_plane = egress::ParseDataPlane(absl::GetFlag(FLAGS_data_plane));
  if (!data_plane.ok()) return Fail(std::string(data_plane.status().message()));
  egress::dataplane::CallerLimits caller_limits;
  caller_limits.max_connections = absl::GetFlag(FLAGS_grpc_max_connections);
  caller_limits.max_connections_per_source = absl::GetFlag(FLAGS_grpc_max_connections_per_source);
  if (caller_limits.max_connections == 0 || caller_limits.max_connections_per_source == 0) {
    return Fail(absl::StrCat("--grpc_max_connections", caller_limits.max_connections == 0 ? "" : "_per_source",
                             "=0 would refuse every caller: give at least 1"));
  }
  auto credentials = egress::LoadServerCredentials(
      {absl::GetFlag(FLAGS_grpc_tls_cert), absl::GetFlag(FLAGS_grpc_tls_key),
       absl::GetFlag(FLAGS_grpc_tls_client_ca)},
      "--grpc_tls");
  if (!credentials.ok()) return Fail(std::string(credentials.status().message()));

  auto metrics = std::make_shared<egress::Metrics>(config->max_origin_labels);
  // Before the server, which logs into it until its last fetch is over.
  std::unique_ptr<egress::AccessLog> access_log;
  if (const std::string where = absl::GetFlag(FLAGS_access_log); where != "off") {
    auto opened = egress::AccessLog::Open(where, *metrics);
    if (!opened.ok()) return Fail(std::string(opened.status().message()));
    access_log = *std::move(opened);
  }

  std::unique_ptr<prometheus::Exposer> exposer;
  try {
    exposer = std::make_unique<prometheus::Exposer>(absl::GetFlag(FLAGS_metrics_listen));
  } catch (const std::exception& e) {
    return Fail(absl::StrCat("cannot serve metrics on ", absl::GetFlag(FLAGS_metrics_listen),
                             ": ", e.what()));
  }
  exposer->RegisterCollectable(metrics);
  // The exposer holds collectables weakly: this one lives as long as main.
  auto process_metrics = std::make_shared<egress::ProcessMetrics>();
  exposer->RegisterCollectable(process_metrics);
  std::shared_ptr<egress::MemoryReleaser> memory_releaser;
  if (const absl::Duration every = absl::GetFlag(FLAGS_memory_release_interval);
      every > absl::ZeroDuration()) {
    memory_releaser = std::make_shared<egress::MemoryReleaser>(every);
    exposer->RegisterCollectable(memory_releaser);
  }

  auto server = egress::EgressServer::Start(
      *config, absl::GetFlag(FLAGS_grpc_listen), *metrics, *metrics, *credentials,
      access_log.get(), connection_age, *data_plane, caller_limits);
  if (!server.ok()) return Fail(std::string(server.status().message()));
  (*server)->OnMaxOriginLabels([metrics](size_t max) { metrics->SetMaxOrigins(max); });
  auto admin = egress::AdminServer::Start(**server, admin_options);
  if (!admin.ok()) return Fail(std::string(admin.status().message()));
  std::optional<egress::ConfigReloader> reloader;
  if (!config_path.empty()) {
    reloader.emplace(**server, config_path, config_text, absl::GetFlag(FLAGS_config_poll));
  }
  std::cerr << "egressd: serving Egress on " << absl::GetFlag(FLAGS_grpc_listen)
            << ", TransportAdmin on " << absl::GetFlag(FLAGS_admin_listen)
            << ", metrics on http://" << absl::GetFlag(FLAGS_metrics_listen)
            << "/metrics; config: " << egress::DescribeConfig(*config) << std::endl;

  while (true) {
    int signal = 0;
    sigwait(&signals, &signal);
    if (signal == SIGHUP) {
      if (reloader) reloader->Reload().IgnoreError();  // logged; the old config stays
      continue;
    }
    std::cerr << "egressd: signal " << signal << ", shutting down" << std::endl;
    break;
  }
  reloader.reset();
  admin->reset();
  (*server)->Shutdown(absl::GetFlag(FLAGS_shutdown_grace));
  return 0;
}
