// The egressd binary as a user starts it: no flags, default ports, SIGTERM to stop.
#include <signal.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <cstdlib>
#include <fstream>
#include <cstdio>
#include <future>
#include <vector>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "egress/v1/egress.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "service/base/files.h"
#include "tests/support/egressd_process.h"
#include "tests/support/http_get.h"
#include "tests/support/nginx_upstream.h"
#include "tests/support/test_pki.h"
#include "tests/support/wait_for.h"

namespace egress::testing {
namespace {

// Logs and outputs the test reads back (service/base/files.h wants a bound).
constexpr size_t kMaxTestFileBytes = 256 << 20;

using ::testing::HasSubstr;

std::string ReadFile(const std::string& path) { return ReadBoundedFile(path, kMaxTestFileBytes).value_or(""); }

// A Fetch of nginx's 1 KiB file through `channel` answers it whole.
void ExpectFetchesOneKilobyte(const std::shared_ptr<grpc::Channel>& channel,
                              const NginxUpstream& nginx) {
  egress::v1::FetchRequest request;
  request.set_url(nginx.HttpUrl("/cl/1k"));
  egress::v1::FetchResponse response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  const grpc::Status status =
      egress::v1::Egress::NewStub(channel)->Fetch(&context, request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.body(), NginxUpstream::FileContent("1k"));
}

// grpc.health.v1.Health/Check with an empty request, through the generic stub (Debian
// ships no stubs for the health proto); returns the serialized HealthCheckResponse.
std::string HealthCheck(const std::shared_ptr<grpc::Channel>& channel) {
  grpc::GenericStub generic(channel);
  grpc::Slice empty("");
  grpc::ByteBuffer request(&empty, 1);
  grpc::ByteBuffer response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  std::promise<grpc::Status> done;
  generic.UnaryCall(&context, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request,
                    &response, [&](grpc::Status status) { done.set_value(status); });
  const grpc::Status status = done.get_future().get();
  if (!status.ok()) return "error: " + status.error_message();
  std::vector<grpc::Slice> slices;
  if (!response.Dump(&slices).ok()) return "error: dump";
  std::string bytes;
  for (const auto& slice : slices) bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  return bytes;
}

TEST(EgressdTest, WithNoFlagsServesOnTheDefaultPortsDeniesLoopbackAndStopsOnSigterm) {
  const std::string dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/egressd");
  auto nginx = NginxUpstream::Start(dir + "/nginx");
  const std::string log = dir + "/egressd.log";
  ChildProcess egressd({Runfile("service/egressd")}, log);
  ASSERT_TRUE(WaitForPort(50051, 30)) << ReadFile(log);
  ASSERT_TRUE(WaitForPort(9464, 5));

  auto channel = grpc::CreateChannel("127.0.0.1:50051", grpc::InsecureChannelCredentials());
  EXPECT_EQ(HealthCheck(channel), std::string("\x08\x01", 2));  // status: SERVING
  auto stub = egress::v1::Egress::NewStub(channel);
  // The default egress policy keeps callers out of loopback (where nginx is).
  egress::v1::FetchRequest request;
  request.set_url(nginx->HttpUrl("/cl/1k"));
  egress::v1::FetchResponse response;
  grpc::ClientContext context;
  const grpc::Status status = stub->Fetch(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(status.error_message(), HasSubstr("a loopback address, denied by default"));

  auto metrics = HttpGet(9464, "/metrics");
  ASSERT_TRUE(metrics.ok());
  EXPECT_THAT(metrics->body, HasSubstr("egress_fetches_total{code=\"PERMISSION_DENIED\"} 1"));
  EXPECT_THAT(metrics->body, HasSubstr("egress_policy_denied_total{reason=\"loopback\"} 1"));

  ASSERT_EQ(egressd.Signal(SIGTERM), 0);
  EXPECT_EQ(egressd.Wait(), 0);
  const std::string output = ReadFile(log);
  EXPECT_THAT(output, HasSubstr("serving Egress on 127.0.0.1:50051"));
  EXPECT_THAT(output, HasSubstr("drain { mode: DRAIN_MODE_FIXED max_bytes: 262144"));
}

std::string TestDir(const std::string& name) {
  const std::string dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
  EXPECT_EQ(std::system(("mkdir -p " + dir).c_str()), 0);
  return dir;
}

// Each kind of invalid config stops egressd at start with the field named.
TEST(EgressdTest, InvalidConfigFilesStopItWithTheFieldNamed) {
  const std::string dir = TestDir("egressd-bad");
  const std::pair<const char*, const char*> cases[] = {
      {"transport { max_idle: 3 }", "no field named \"max_idle\""},
      {"drain { max_bytes: -5 }", "max_bytes: -5"},
      {"drain { max_duration { seconds: -1 } }", "drain.max_duration: must not be negative"},
      {"transport { connect_timeout { } }", "transport.connect_timeout: must be positive"},
      {"policy { allow_cidrs: \"10.0.0.0/40\" }", "policy.allow_cidrs[0]"},
  };
  for (const auto& [text, words] : cases) {
    std::ofstream(dir + "/bad.textproto") << text << "\n";
    int status = -1;
    const std::string output = RunShell(
        absl::StrCat(Runfile("service/egressd"), " --config=", dir, "/bad.textproto 2>&1"), &status);
    EXPECT_EQ(WEXITSTATUS(status), 2) << text;
    EXPECT_THAT(output, HasSubstr(words)) << text;
  }
}

// --data_plane=loops (issue 37's first slices): egressd's own server answers Fetch and
// health on the Egress port, TransportAdmin stays on gRPC's; a value it does not know, or
// TLS files that do not load, stop egressd at start.
TEST(EgressdTest, WithDataPlaneLoopsServesFetchAndHealthAndRefusesWhatItCannotServe) {
  const std::string dir = TestDir("egressd-loops");
  std::ofstream(dir + "/not-a-certificate.pem") << "not a certificate\n";
  const std::string garbage = dir + "/not-a-certificate.pem";
  const std::pair<std::string, std::string> refused[] = {
      {"--data_plane=nghttp2", "--data_plane=nghttp2: give grpc_library or loops"},
      {"--data_plane=loops --grpc_tls_cert=/nonexistent/c.pem --grpc_tls_key=k.pem",
       "--grpc_tls_cert: "},
      {absl::StrCat("--data_plane=loops --grpc_tls_cert=", garbage, " --grpc_tls_key=", garbage),
       "the Egress listener's TLS certificate (--grpc_tls_cert) does not load"},
  };
  for (const auto& [flags, words] : refused) {
    int status = -1;
    const std::string output =
        RunShell(absl::StrCat(Runfile("service/egressd"), " ", flags, " 2>&1"), &status);
    EXPECT_EQ(WEXITSTATUS(status), 2) << flags;
    EXPECT_THAT(output, HasSubstr(words)) << flags;
  }

  auto nginx = NginxUpstream::Start(dir + "/nginx");
  std::ofstream(dir + "/egress.textproto") << "policy { allow_cidrs: \"127.0.0.0/8\" }\n";
  EgressdProcess egressd(Runfile("service/egressd"), dir + "/egress.textproto",
                         dir + "/egressd.log", {"--data_plane=loops"});
  ASSERT_TRUE(egressd.WaitUntilListening()) << ReadFile(egressd.log_file());
  auto channel = grpc::CreateChannel(egressd.grpc_target(), grpc::InsecureChannelCredentials());
  EXPECT_EQ(HealthCheck(channel), std::string("\x08\x01", 2));  // status: SERVING
  ExpectFetchesOneKilobyte(channel, *nginx);
  auto admin = egress::v1::TransportAdmin::NewStub(
      grpc::CreateChannel(egressd.admin_target(), grpc::InsecureChannelCredentials()));
  egress::v1::Config config;
  grpc::ClientContext admin_context;
  EXPECT_TRUE(admin->GetConfig(&admin_context, egress::v1::GetConfigRequest(), &config).ok());
  ASSERT_EQ(egressd.process().Signal(SIGTERM), 0);
  EXPECT_EQ(egressd.process().Wait(), 0);
}

// --data_plane=loops with --grpc_tls_cert, _key and _client_ca serves Egress and health
// over mTLS: a caller with a certificate of the CA is served, one without is not.
TEST(EgressdTest, WithDataPlaneLoopsServesOverMtls) {
  const std::string dir = TestDir("egressd-loops-tls");
  Pki pki(dir + "/pki");
  auto nginx = NginxUpstream::Start(dir + "/nginx");
  std::ofstream(dir + "/egress.textproto") << "policy { allow_cidrs: \"127.0.0.0/8\" }\n";
  EgressdProcess egressd(Runfile("service/egressd"), dir + "/egress.textproto",
                         dir + "/egressd.log",
                         {"--data_plane=loops", "--grpc_tls_cert=" + pki.File("server.pem"),
                          "--grpc_tls_key=" + pki.File("server.key"),
                          "--grpc_tls_client_ca=" + pki.File("ca.pem")});
  ASSERT_TRUE(egressd.WaitUntilListening()) << ReadFile(egressd.log_file());
  const std::string target = absl::StrCat("localhost:", egressd.grpc_port());
  auto channel = grpc::CreateChannel(target, pki.Client("checkout"));
  EXPECT_EQ(HealthCheck(channel), std::string("\x08\x01", 2));  // status: SERVING
  ExpectFetchesOneKilobyte(channel, *nginx);
  EXPECT_THAT(HealthCheck(grpc::CreateChannel(target, pki.Client(""))), HasSubstr("error"));
  ASSERT_EQ(egressd.process().Signal(SIGTERM), 0);
  EXPECT_EQ(egressd.process().Wait(), 0);
}

class ReloadTest : public ::testing::Test {
 protected:
  void WriteConfig(const std::string& body) {
    std::ofstream(path_ + ".tmp") << body;
    ASSERT_EQ(std::rename((path_ + ".tmp").c_str(), path_.c_str()), 0);
  }
  uint64_t MaxBytesInForce() {
    egress::v1::Config config;
    grpc::ClientContext context;
    EXPECT_TRUE(admin_->GetConfig(&context, egress::v1::GetConfigRequest(), &config).ok());
    return config.drain().max_bytes();
  }
  bool WaitForMaxBytes(uint64_t expected) {
    return WaitFor([&] { return MaxBytesInForce() == expected; });
  }
  void Update(uint64_t max_bytes) {
    egress::v1::UpdateConfigRequest request;
    request.mutable_config()->mutable_drain()->set_max_bytes(max_bytes);
    egress::v1::Config in_force;
    grpc::ClientContext context;
    ASSERT_TRUE(admin_->UpdateConfig(&context, request, &in_force).ok());
    EXPECT_EQ(in_force.drain().max_bytes(), max_bytes);
  }

  std::string path_;
  std::unique_ptr<egress::v1::TransportAdmin::Stub> admin_;
};

// The most recent change wins: UpdateConfig over the file, then a changed file (or
// SIGHUP) over UpdateConfig. A bad file is rejected and the config in force stays.
TEST_F(ReloadTest, FileChangesAndUpdateConfigTakeTurnsAndABadFileChangesNothing) {
  const std::string dir = TestDir("egressd-reload");
  path_ = dir + "/egress.textproto";
  const std::string log = dir + "/egressd.log";
  WriteConfig("drain { max_bytes: 1000 }\n");
  EgressdProcess egressd(Runfile("service/egressd"), path_, log, {"--config_poll=50ms"});
  ASSERT_TRUE(egressd.WaitUntilListening()) << ReadFile(log);
  admin_ = egress::v1::TransportAdmin::NewStub(
      grpc::CreateChannel(egressd.admin_target(), grpc::InsecureChannelCredentials()));

  EXPECT_EQ(MaxBytesInForce(), 1000u);
  Update(2000);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // an unchanged file does not win
  EXPECT_EQ(MaxBytesInForce(), 2000u);

  WriteConfig("drain { max_bytes: 3000 }\n");
  EXPECT_TRUE(WaitForMaxBytes(3000));

  WriteConfig("drain { max_bytes: -1 }\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(MaxBytesInForce(), 3000u);
  EXPECT_THAT(ReadFile(log), HasSubstr("rejected config file"));

  Update(4000);
  ASSERT_EQ(egressd.process().Signal(SIGHUP), 0);  // the file is still bad: nothing changes
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(MaxBytesInForce(), 4000u);

  WriteConfig("drain { max_bytes: 5000 }\n");
  EXPECT_TRUE(WaitForMaxBytes(5000));
  Update(6000);
  ASSERT_EQ(egressd.process().Signal(SIGHUP), 0);  // SIGHUP re-applies the file even though it did not change
  EXPECT_TRUE(WaitForMaxBytes(5000));

  ASSERT_EQ(egressd.process().Signal(SIGTERM), 0);
  EXPECT_EQ(egressd.process().Wait(), 0);
}

}  // namespace
}  // namespace egress::testing

namespace egress::testing {
namespace {

// grpc.health.v1.Health/Watch for the whole server (empty request), as a generic
// streaming call; keeps the status bytes of every message received.
class HealthWatch : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  explicit HealthWatch(const std::shared_ptr<grpc::Channel>& channel) : stub_(channel) {
    stub_.PrepareBidiStreamingCall(&context_, "/grpc.health.v1.Health/Watch",
                                   grpc::StubOptions(), this);
    StartWrite(&request_);
    StartWritesDone();
    StartRead(&message_);
    StartCall();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;
    std::vector<grpc::Slice> slices;
    std::string bytes;
    if (message_.Dump(&slices).ok()) {
      for (const auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      statuses_.push_back(bytes);
    }
    StartRead(&message_);
  }
  void OnDone(const grpc::Status&) override { done_.set_value(); }

  // Waits for the call to end; the statuses it reported.
  std::vector<std::string> Wait() {
    done_.get_future().wait();
    std::lock_guard<std::mutex> lock(mu_);
    return statuses_;
  }
  std::vector<std::string> SoFar() {
    std::lock_guard<std::mutex> lock(mu_);
    return statuses_;
  }

 private:
  grpc::GenericStub stub_;
  grpc::ClientContext context_;
  grpc::ByteBuffer request_{std::vector<grpc::Slice>{grpc::Slice("")}.data(), 1};
  grpc::ByteBuffer message_;
  std::mutex mu_;
  std::vector<std::string> statuses_;
  std::promise<void> done_;
};

const std::string kServing("\x08\x01", 2), kNotServing("\x08\x02", 2);

// SIGTERM during a load: health turns NOT_SERVING, fetches in flight finish, later ones
// are refused (UNAVAILABLE, never sent upstream), egressd exits 0. Every fetch that
// reached the upstream was answered to its caller.
TEST(EgressdTest, SigtermDuringLoadLosesNoAcceptedFetch) {
  const std::string dir = TestDir("egressd-sigterm");
  auto nginx = NginxUpstream::Start(dir + "/nginx");
  std::ofstream(dir + "/egress.textproto") << "policy { allow_cidrs: \"127.0.0.0/8\" }\n";
  EgressdProcess egressd(Runfile("service/egressd"), dir + "/egress.textproto",
                         dir + "/egressd.log", {"--shutdown_grace=10s"});
  ASSERT_TRUE(egressd.WaitUntilListening()) << ReadFile(egressd.log_file());
  auto channel = grpc::CreateChannel(egressd.grpc_target(), grpc::InsecureChannelCredentials());
  HealthWatch watch(channel);
  WaitFor([&] { return !watch.SoFar().empty(); }, absl::Seconds(10));
  ASSERT_EQ(watch.SoFar(), std::vector<std::string>{kServing});

  const std::string uri = "/slow-300ms?t=sigterm";
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0}, ok_after_sigterm{0}, refused{0}, other{0};
  std::atomic<bool> sigterm_sent{false};
  std::vector<std::thread> callers;
  for (int i = 0; i < 8; ++i) {
    callers.emplace_back([&] {
      auto stub = egress::v1::Egress::NewStub(channel);
      while (!stop) {
        egress::v1::FetchRequest request;
        request.set_url(nginx->HttpUrl(uri));
        egress::v1::FetchResponse response;
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
        const bool before = !sigterm_sent;
        const grpc::Status status = stub->Fetch(&context, request, &response);
        if (status.ok() && response.body() == "late\n") {
          ++ok;
          if (before && sigterm_sent) ++ok_after_sigterm;  // in flight at SIGTERM
        } else if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
          ++refused;
          stop = true;  // egressd is going away
        } else {
          ADD_FAILURE() << status.error_code() << " " << status.error_message();
          ++other;
        }
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::seconds(1));
  sigterm_sent = true;
  ASSERT_EQ(egressd.process().Signal(SIGTERM), 0);
  const auto sigterm_time = std::chrono::steady_clock::now();
  const int exit_code = egressd.process().Wait();
  // The fetches in flight take 300 ms; the open health Watch must not hold egressd for
  // the rest of its 10 s grace period.
  EXPECT_LT(std::chrono::steady_clock::now() - sigterm_time, std::chrono::seconds(10));
  stop = true;
  for (auto& caller : callers) caller.join();

  EXPECT_EQ(exit_code, 0);
  EXPECT_EQ(watch.Wait().back(), kNotServing);
  EXPECT_GT(ok_after_sigterm, 0);
  EXPECT_GT(refused, 0);
  EXPECT_EQ(other, 0);
  // Each request nginx saw was a fetch whose caller got its answer.
  EXPECT_EQ(nginx->WaitForRequests(uri, ok).size(), static_cast<size_t>(ok));
  EXPECT_THAT(ReadFile(dir + "/egressd.log"), HasSubstr("shutting down"));
}

}  // namespace
}  // namespace egress::testing
