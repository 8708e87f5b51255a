// The --config file and the admin flags as egressd's binary meets them (issue 21): what
// stops it at start (exit 2), and what a reload never applies.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "egress/v1/egress.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "service/base/files.h"
#include "tests/support/egressd_process.h"
#include "tests/support/wait_for.h"

namespace egress::testing {
namespace {

// Logs and outputs the test reads back (service/base/files.h wants a bound).
constexpr size_t kMaxTestFileBytes = 256 << 20;

using ::testing::HasSubstr;
using ::testing::Not;

std::string ReadFile(const std::string& path) { return ReadBoundedFile(path, kMaxTestFileBytes).value_or(""); }

std::string TestDir(const std::string& name) {
  const std::string dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
  EXPECT_EQ(std::system(("mkdir -p " + dir).c_str()), 0);
  return dir;
}

// Runs egressd with `flags` (its listeners on free loopback ports) until it exits or
// 10 s pass; its exit code and output.
int RunEgressd(const std::string& flags, std::string* output) {
  int status = -1;
  *output = RunShell(absl::StrCat("timeout 10 ", Runfile("service/egressd"),
                                  " --grpc_listen=127.0.0.1:", FreePort(),
                                  " --metrics_listen=127.0.0.1:", FreePort(), " ", flags, " 2>&1"),
                     &status);
  return WEXITSTATUS(status);
}

TEST(ConfigFileTest, AConfigNamingADirectoryStopsItAtStartAndFailsCheckConfig) {
  const std::string dir = TestDir("config-dir");
  std::ofstream(dir + "/egress.textproto") << "drain { max_bytes: 1000 }\n";
  std::string output;
  EXPECT_EQ(RunEgressd(absl::StrCat("--admin_listen=127.0.0.1:", FreePort(), " --config=", dir),
                       &output),
            2);
  EXPECT_THAT(output, HasSubstr("is a directory, not a file"));
  EXPECT_EQ(RunEgressd(absl::StrCat("--check_config --config=", dir), &output), 2);
  EXPECT_THAT(output, HasSubstr("is a directory, not a file"));
}

TEST(ConfigFileTest, AnEmptyConfigFileStopsItAtStartAndFailsCheckConfig) {
  const std::string dir = TestDir("config-empty");
  std::ofstream(dir + "/egress.textproto") << "  \n";
  std::string output;
  EXPECT_EQ(RunEgressd(absl::StrCat("--admin_listen=127.0.0.1:", FreePort(), " --config=", dir,
                                    "/egress.textproto"),
                       &output),
            2);
  EXPECT_THAT(output, HasSubstr("is empty"));
  EXPECT_EQ(RunEgressd(absl::StrCat("--check_config --config=", dir, "/egress.textproto"), &output),
            2);
  EXPECT_THAT(output, HasSubstr("is empty"));
}

TEST(ConfigFileTest, AConfigFileThatCannotBeReadStopsItAtStartAndFailsCheckConfig) {
  const std::string dir = TestDir("config-unreadable");
  std::ofstream(dir + "/not-a-dir") << "drain { max_bytes: 1000 }\n";
  for (const std::string& path : {dir + "/missing.textproto", dir + "/not-a-dir/egress.textproto"}) {
    std::string output;
    EXPECT_EQ(RunEgressd(absl::StrCat("--admin_listen=127.0.0.1:", FreePort(), " --config=", path),
                         &output),
              2)
        << path;
    EXPECT_THAT(output, HasSubstr(absl::StrCat("cannot read \"", path, "\"")));
    EXPECT_EQ(RunEgressd(absl::StrCat("--check_config --config=", path), &output), 2) << path;
    EXPECT_THAT(output, HasSubstr(absl::StrCat("cannot read \"", path, "\"")));
  }
}

// Warnings are printed before --check_config returns, on the path egressd starts by.
TEST(ConfigFileTest, ACallerHeaderWithoutTrustedPeersIsWarnedAboutAtStart) {
  const std::string dir = TestDir("config-warning");
  std::ofstream(dir + "/egress.textproto") << "policy { caller_header: \"x-egress-caller\" }\n";
  std::string output;
  EXPECT_EQ(RunEgressd(absl::StrCat("--check_config --config=", dir, "/egress.textproto"), &output),
            0);
  EXPECT_THAT(output, HasSubstr("egressd: warning: policy.caller_header \"x-egress-caller\" is "
                                "set but policy.caller_header_trusted_peers is empty"));
}

// Issue 38: a config that is no regular file, or too big, stops egressd at start at once
// (the old reader grew by a GiB a second on /dev/zero until something killed it).
TEST(ConfigFileTest, ADeviceAsConfigStopsItAtStartNamingWhatItIs) {
  std::string output;
  EXPECT_EQ(RunEgressd(absl::StrCat("--admin_listen=127.0.0.1:", FreePort(), " --config=/dev/zero"),
                       &output),
            2);
  EXPECT_THAT(output, HasSubstr("\"/dev/zero\" is a character device, not a regular file"));
  EXPECT_EQ(RunEgressd("--check_config --config=/dev/zero", &output), 2);
  EXPECT_THAT(output, HasSubstr("\"/dev/zero\" is a character device, not a regular file"));
}

TEST(ConfigFileTest, AConfigOverTheSizeBoundStopsItAtStartNamingTheBound) {
  const std::string path = TestDir("config-huge") + "/egress.textproto";
  {
    std::ofstream out(path);
    out << "drain { max_bytes: 1000 }\n";
    out << std::string(5 << 20, ' ') << "\n";
  }
  std::string output;
  EXPECT_EQ(RunEgressd(absl::StrCat("--check_config --config=", path), &output), 2);
  EXPECT_THAT(output, HasSubstr("is larger than 4194304 bytes"));
  EXPECT_LT(output.size(), 2000u) << output.substr(0, 2000);
}

// The parse error quotes the offending line: bounded, and escaped so that no NUL, control
// byte or newline of the file reaches the log (the old log held the whole 3 MiB line).
TEST(ConfigFileTest, AHugeBadLineIsQuotedBoundedAndEscaped) {
  const std::string path = TestDir("config-long-line") + "/egress.textproto";
  {
    std::ofstream out(path);
    out << "drain { max_bytes: 1000 }\n";
    out << "no_such_field" << std::string(3 << 20, 'A');
    out << std::string(10, '\0') << "\x1b[2J\r\n";
  }
  std::string output;
  EXPECT_EQ(RunEgressd(absl::StrCat("--check_config --config=", path), &output), 2);
  EXPECT_THAT(output, HasSubstr("line 2:"));
  EXPECT_THAT(output, HasSubstr("no_such_fieldAAAA"));
  EXPECT_THAT(output, HasSubstr("..."));
  EXPECT_LT(output.size(), 2000u) << output.substr(0, 2000);
  EXPECT_EQ(output.find('\0'), std::string::npos);
  EXPECT_EQ(output.find('\x1b'), std::string::npos);
}

// A loopback port held listening for the test's life: whoever else listens there fails.
class BusyPort {
 public:
  BusyPort() : fd_(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(listen(fd_, 1), 0);
    EXPECT_EQ(getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    port_ = ntohs(addr.sin_port);
  }
  ~BusyPort() { close(fd_); }
  int port() const { return port_; }

 private:
  int fd_;
  int port_ = 0;
};

// The flags are refused before anything listens: with the Egress and metrics ports taken,
// what stops egressd is still the admin flags, not a listener that could not start.
TEST(ConfigFileTest, APlaintextAdminTokenOffLoopbackStopsItBeforeAnythingListens) {
  const std::string dir = TestDir("admin-plaintext");
  std::ofstream(dir + "/token") << "s3cret\n";
  BusyPort grpc_port, metrics_port;
  std::string output;
  EXPECT_EQ(RunEgressd(absl::StrCat("--admin_listen=0.0.0.0:", FreePort(),
                                    " --admin_token_file=", dir, "/token",
                                    " --grpc_listen=127.0.0.1:", grpc_port.port(),
                                    " --metrics_listen=127.0.0.1:", metrics_port.port()),
                       &output),
            2);
  EXPECT_THAT(output, HasSubstr("the bearer token would cross the network in the clear"));
  EXPECT_THAT(output, Not(HasSubstr("cannot serve metrics")));
  EXPECT_THAT(output, Not(HasSubstr("cannot listen")));
}

// The same for every other flag refused at start: its own message, not a busy port's.
TEST(ConfigFileTest, EveryRefusedFlagStopsItBeforeAnythingListens) {
  const std::string dir = TestDir("refused-flags");
  std::ofstream(dir + "/ca.pem") << "not a certificate\n";
  const std::pair<std::string, std::string> cases[] = {
      {"--admin_tls_cert=/nonexistent/cert.pem --admin_tls_key=/nonexistent/key.pem",
       "--admin_tls"},
      {absl::StrCat("--admin_tls_client_ca=", dir, "/ca.pem --admin_identities=spiffe://ops"),
       "--admin_tls"},
      {"--grpc_max_connection_age=-1s", "must not be negative"},
  };
  for (const auto& [flags, words] : cases) {
    BusyPort grpc_port, metrics_port;
    std::string output;
    EXPECT_EQ(RunEgressd(absl::StrCat(flags, " --grpc_listen=127.0.0.1:", grpc_port.port(),
                                      " --metrics_listen=127.0.0.1:", metrics_port.port()),
                         &output),
              2)
        << flags;
    EXPECT_THAT(output, HasSubstr(words)) << flags;
    EXPECT_THAT(output, Not(HasSubstr("cannot serve metrics"))) << flags;
  }
}

class ReloadFileTest : public ::testing::Test {
 protected:
  void Start(const std::string& name, const std::string& contents,
             const std::string& poll = "--config_poll=50ms",
             std::vector<std::string> flags = {}) {
    dir_ = TestDir(name);
    path_ = dir_ + "/egress.textproto";
    log_ = dir_ + "/egressd.log";
    std::ofstream(path_) << contents;
    flags.push_back(poll);
    egressd_ = std::make_unique<EgressdProcess>(Runfile("service/egressd"), path_, log_, flags);
    ASSERT_TRUE(egressd_->WaitUntilListening()) << ReadFile(log_);
    admin_ = egress::v1::TransportAdmin::NewStub(
        grpc::CreateChannel(egressd_->admin_target(), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    if (egressd_ && egressd_->process().Running()) egressd_->process().Signal(SIGKILL);
  }
  // Waits (up to 10 s) until the log holds `text`.
  bool WaitForLog(const std::string& text) {
    return WaitFor([&] { return ReadFile(log_).find(text) != std::string::npos; },
                   absl::Seconds(10));
  }
  // SIGTERM, then up to `seconds` for egressd to exit on its own (SIGKILL after): its
  // exit code, or -1 when it had to be killed.
  int StopWithin(int seconds) {
    ChildProcess& process = egressd_->process();
    process.Signal(SIGTERM);
    WaitFor([&] { return !process.Running(); }, absl::Seconds(seconds));
    if (!process.Running()) return process.Wait();
    process.Signal(SIGKILL);
    process.Wait();
    return -1;
  }
  // Replaces `path` with a FIFO nobody writes to: opening it to read blocks forever.
  static void MakeFifo(const std::string& path) {
    ::unlink(path.c_str());
    ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0) << path;
  }
  grpc::Status GetConfig(const std::string& token, egress::v1::Config* config) {
    grpc::ClientContext context;
    if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    return admin_->GetConfig(&context, egress::v1::GetConfigRequest(), config);
  }
  egress::v1::Config InForce() {
    egress::v1::Config config;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    EXPECT_TRUE(admin_->GetConfig(&context, egress::v1::GetConfigRequest(), &config).ok());
    return config;
  }
  // Replaces the file's contents in place, as an editor or a careless script does.
  void Overwrite(const std::string& contents) {
    std::ofstream(path_, std::ios::trunc) << contents;
  }

  std::string dir_;
  std::string path_;
  std::string log_;
  std::unique_ptr<EgressdProcess> egressd_;
  std::unique_ptr<egress::v1::TransportAdmin::Stub> admin_;
};

TEST_F(ReloadFileTest, AnEmptyFileWrittenDuringARunIsNeverApplied) {
  Start("reload-empty", "drain { max_bytes: 1000 }\npolicy { deny_hosts: \"blocked.test\" }\n");
  ASSERT_EQ(InForce().drain().max_bytes(), 1000u);
  Overwrite("");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // ten polls
  EXPECT_EQ(InForce().drain().max_bytes(), 1000u);
  EXPECT_EQ(InForce().policy().deny_hosts_size(), 1);
  EXPECT_THAT(ReadFile(log_), HasSubstr("is empty; an empty config is never applied"));
}

TEST_F(ReloadFileTest, ARejectedReloadIsRetriedOnTheNextPoll) {
  Start("reload-retry", "drain { max_bytes: 1000 }\n");
  const std::string ca = path_ + ".ca.pem";
  Overwrite(absl::StrCat("drain { max_bytes: 2000 }\ntransport { extra_ca_file: \"", ca, "\" }\n"));
  WaitFor([&] { return ReadFile(log_).find("rejected config file") != std::string::npos; });
  EXPECT_THAT(ReadFile(log_), HasSubstr("rejected config file"));
  EXPECT_EQ(InForce().drain().max_bytes(), 1000u);  // the CA file is not there yet

  int status = -1;
  RunShell(absl::StrCat("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
                        "-nodes -keyout ", ca, ".key -out ", ca, " -days 2 -subj /CN=late-ca "
                        "2>/dev/null"),
           &status);
  ASSERT_EQ(status, 0);
  EXPECT_TRUE(WaitFor([&] { return InForce().drain().max_bytes() == 2000u; })) << ReadFile(log_);
}

// A file caught half-written, whose first half is a valid config on its own, is not
// applied: the reloader waits for two reads a moment apart to agree.
TEST_F(ReloadFileTest, AFileCaughtHalfWrittenIsNotApplied) {
  Start("reload-partial", "drain { max_bytes: 1000 }\n", "--config_poll=200ms");
  const std::string head = "drain { max_bytes: 2000 }\n";
  const std::string tail = "policy { deny_hosts: \"a.test\" deny_hosts: \"b.test\" }\n";
  std::atomic<bool> writing{true};
  std::atomic<int> partial_seen{0};
  std::thread watcher([&] {
    while (writing) {
      const egress::v1::Config c = InForce();
      const bool before = c.drain().max_bytes() == 1000u && c.policy().deny_hosts_size() == 0;
      const bool whole = c.drain().max_bytes() == 2000u && c.policy().deny_hosts_size() == 2;
      if (!before && !whole) ++partial_seen;
    }
  });
  for (int i = 0; i < 20; ++i) {  // rewritten in place, in two writes 30 ms apart
    std::ofstream out(path_, std::ios::trunc);
    out << head << std::flush;
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    out << tail << std::flush;
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
  }
  const bool whole = WaitFor([&] { return InForce().policy().deny_hosts_size() == 2; });
  writing = false;
  watcher.join();
  EXPECT_TRUE(whole) << ReadFile(log_);
  EXPECT_EQ(partial_seen, 0);
}

// Issue 38: the reloader meets a FIFO where the config was. It refuses it at once (an
// open that waited for a writer would hold the reloader, and SIGTERM, forever).
TEST_F(ReloadFileTest, AConfigReplacedByAFifoIsRefusedAndSigtermStillStopsIt) {
  Start("reload-fifo", "drain { max_bytes: 1000 }\n", "--config_poll=50ms",
        {"--shutdown_grace=2s"});
  MakeFifo(path_);
  EXPECT_TRUE(WaitForLog("is a FIFO, not a regular file")) << ReadFile(log_);
  EXPECT_EQ(InForce().drain().max_bytes(), 1000u);  // the config in force stays
  EXPECT_EQ(StopWithin(15), 0) << ReadFile(log_);
}

// SIGHUP reads the file on egressd's main thread: a FIFO must not hold it either.
TEST_F(ReloadFileTest, SighupWithAFifoForConfigIsRefusedAndSigtermStillStopsIt) {
  Start("reload-fifo-hup", "drain { max_bytes: 1000 }\n", "--config_poll=1h",
        {"--shutdown_grace=2s"});
  MakeFifo(path_);
  egressd_->process().Signal(SIGHUP);
  EXPECT_TRUE(WaitForLog("is a FIFO, not a regular file")) << ReadFile(log_);
  EXPECT_EQ(StopWithin(15), 0) << ReadFile(log_);
}

// Issue 38: an admin token file swapped for a FIFO. The old Authorize opened it on the
// gRPC callback thread and hung the call (and every later one) without a token; now the
// token is read off the serving threads and the call is refused at once.
TEST_F(ReloadFileTest, AnAdminTokenFileReplacedByAFifoFailsAdminCallsAndFetchStillServes) {
  const std::string token = TestDir("token-fifo") + "/token";
  std::ofstream(token) << "s3cret\n";
  // The Fetch goes to egressd's own metrics listener, on loopback.
  Start("token-fifo", "policy { allow_cidrs: \"127.0.0.0/8\" }\n", "--config_poll=50ms",
        {"--shutdown_grace=2s", "--admin_token_file=" + token});
  egress::v1::Config config;
  ASSERT_TRUE(GetConfig("s3cret", &config).ok());
  MakeFifo(token);
  grpc::Status status;
  WaitFor([&] {  // the old token holds until the change is seen
    status = GetConfig("s3cret", &config);
    return !status.ok();
  });
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("is a FIFO, not a regular file"));
  for (const char* guess : {"s3cret", "", "guess"}) {
    EXPECT_EQ(GetConfig(guess, &config).error_code(), grpc::StatusCode::UNAUTHENTICATED) << guess;
  }
  auto egress = egress::v1::Egress::NewStub(
      grpc::CreateChannel(egressd_->grpc_target(), grpc::InsecureChannelCredentials()));
  egress::v1::FetchRequest request;
  request.set_url(absl::StrCat("http://127.0.0.1:", egressd_->metrics_port(), "/metrics"));
  egress::v1::FetchResponse response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  const grpc::Status fetched = egress->Fetch(&context, request, &response);
  EXPECT_TRUE(fetched.ok()) << fetched.error_message();
  EXPECT_EQ(response.status_code(), 200);
  EXPECT_EQ(StopWithin(15), 0) << ReadFile(log_);
}

// Issue 38: transport.extra_ca_file naming a FIFO. OpenSSL opened it itself and blocked
// the UpdateConfig call for good; now the bounded reader refuses it, naming the field.
TEST_F(ReloadFileTest, AnExtraCaFileThatIsAFifoIsRefusedByUpdateConfigNamingTheField) {
  Start("ca-fifo", "drain { max_bytes: 1000 }\n", "--config_poll=1h", {"--shutdown_grace=2s"});
  const std::string ca = dir_ + "/ca.pem";
  MakeFifo(ca);
  egress::v1::UpdateConfigRequest request;
  *request.mutable_config() = InForce();
  request.mutable_config()->mutable_transport()->set_extra_ca_file(ca);
  egress::v1::Config in_force;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  const grpc::Status status = admin_->UpdateConfig(&context, request, &in_force);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("transport.extra_ca_file"));
  EXPECT_THAT(status.error_message(), HasSubstr("is a FIFO, not a regular file"));
  EXPECT_EQ(InForce().transport().extra_ca_file(), "");
  EXPECT_EQ(StopWithin(15), 0) << ReadFile(log_);
}

}  // namespace
}  // namespace egress::testing
