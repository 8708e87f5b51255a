// Spreading across replicas (issue 20): three egressd processes on 127.0.0.11, .12 and
// .13, one port, behind one name (egress.test in a hosts file bind-mounted over
// /etc/hosts in the test's own mount namespace; GRPC_DNS_RESOLVER=native makes gRPC read
// it through getaddrinfo). One long-lived client of each language, C++ in process,
// Python, Node, Go and Java as child processes, calls dns:///egress.test:PORT under a
// steady load (Go and Java compile once, at the start, at the same time: about 10 s).
// Which replica answered comes from the replicas' own metrics: each language fetches a
// host of its own (cpp.test, python.test, node.test, go.test, java.test, all 127.0.0.1:
// nginx), so egress_upstream_requests_total{origin} on a replica counts that language's
// calls there.
//
// What holds: the calls of each client spread over all three replicas (round_robin is
// the clients' default; a caller's pick_first sends all to one); a fourth replica added
// to the name receives calls from every client within the connection age plus its grace
// (the replicas run --grpc_max_connection_age=2s, grace 1s: the GOAWAY makes the
// clients re-resolve); a replica that gets SIGTERM under load loses no call: every call
// of every client is answered HTTP 200. How: the C++, Python (gRPC C-core) and Go
// clients watch each replica's health and leave it at NOT_SERVING, egressd's first step
// at SIGTERM; a call already on its way, and Node's and Java's (grpc-js has no
// client-side health checking; grpc-java's is in grpc-services, which Debian does not
// ship), is refused (UNAVAILABLE, reason SHUTTING_DOWN) or, once gRPC's shutdown has
// begun, cancelled, and the client libraries send it again to the next replica
// (shutdown_retries, ShutdownRetries, shutdownRetries; a cancelled one only for a GET,
// HEAD, OPTIONS or TRACE).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/egress_client.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/support/data_plane_under_test.h"
#include "tests/support/egressd_process.h"
#include "tests/support/http_get.h"
#include "tests/support/nginx_upstream.h"
#include "tests/support/wait_for.h"

namespace egress::testing {
namespace {

using client::BodyMode;
using client::ClientOptions;
using client::EgressClient;
using client::FetchOptions;

// gRPC reads its resolver choice once, at its first use: before any channel.
const bool kNativeResolver = setenv("GRPC_DNS_RESOLVER", "native", 1) == 0;

constexpr char kName[] = "egress.test";
const std::vector<std::string> kLanguages = {"cpp", "python", "node", "go", "java"};
// --grpc_max_connection_age and its grace, as the replicas run them.
constexpr absl::Duration kAge = absl::Seconds(2);
constexpr absl::Duration kGrace = absl::Seconds(1);

// True once a TCP connection to ip:port succeeds, within `seconds`.
bool WaitForAddress(const std::string& ip, int port, int seconds) {
  const absl::Time deadline = absl::Now() + absl::Seconds(seconds);
  while (absl::Now() < deadline) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    inet_pton(AF_INET, ip.c_str(), &address.sin_addr);
    const bool connected =
        connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
    close(fd);
    if (connected) return true;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return false;
}

// Polls `done` every 50 ms until it holds or `timeout` passes; its last answer.
bool Eventually(absl::Duration timeout, const std::function<bool()>& done) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!done()) {
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return true;
}

// One egressd on 127.0.0.<11 + index - 1>:port.
struct Replica {
  std::string ip;
  std::unique_ptr<EgressdProcess> process;
};

// A client of one language under load, as seen from its end: calls answered HTTP 200,
// and the others with what went wrong.
struct LoadResult {
  int64_t ok = 0;
  int64_t failed = 0;
  std::string errors;
};

// The C++ client, in process: two threads over one EgressClient (one channel).
class CppLoad {
 public:
  CppLoad(const std::string& target, const std::string& url) : url_(url) {
    ClientOptions options;
    options.target = target;
    options.default_timeout = absl::Seconds(10);
    // Re-resolution at most every 0.5 s (gRPC's default: 30 s), so that a GOAWAY from a
    // replica's connection age picks up a replica that joined within the test's time.
    options.channel_args.SetInt(GRPC_ARG_DNS_MIN_TIME_BETWEEN_RESOLUTIONS_MS, 500);
    client_ = std::make_unique<EgressClient>(std::move(options));
    for (int i = 0; i < 2; ++i) threads_.emplace_back([this] { Run(); });
  }
  LoadResult Stop() {
    stop_ = true;
    for (std::thread& thread : threads_) thread.join();
    threads_.clear();
    std::lock_guard<std::mutex> lock(mu_);
    return result_;
  }
  ~CppLoad() {
    if (!threads_.empty()) Stop();
  }

 private:
  void Run() {
    FetchOptions head_only;
    head_only.body_mode = BodyMode::kHeadOnly;
    while (!stop_) {
      auto response = client_->Fetch(url_, head_only);
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (response.ok() && response->status_code() == 200) {
          ++result_.ok;
        } else {
          ++result_.failed;
          if (result_.failed <= 5) {
            absl::StrAppend(&result_.errors, absl::FormatTime("%H:%M:%E3S ", absl::Now(), absl::UTCTimeZone()),
                            response.ok() ? absl::StrCat("HTTP ", response->status_code())
                                          : response.status().ToString(),
                            "; ");
          }
        }
      }
      absl::SleepFor(absl::Milliseconds(5));  // a steady load, not a benchmark
    }
  }

  const std::string url_;
  std::unique_ptr<EgressClient> client_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  LoadResult result_;
  std::vector<std::thread> threads_;
};

class ReplicasTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(kNativeResolver);
    // The test mounts its own /etc/hosts: only ever in a mount namespace of its own.
    char own[64] = {}, init[64] = {};
    ASSERT_GT(readlink("/proc/self/ns/mnt", own, sizeof(own) - 1), 0);
    if (readlink("/proc/1/ns/mnt", init, sizeof(init) - 1) > 0) {
      ASSERT_STRNE(own, init) << "run under tests/support/run_in_netns.sh (bazel test does)";
    }
    const char* tmp = std::getenv("TEST_TMPDIR");
    dir_ = absl::StrCat(tmp ? tmp : "/tmp", "/replicas-test-", getpid());
    nginx_ = NginxUpstream::Start(dir_ + "/nginx");
    ASSERT_TRUE(nginx_);
    port_ = FreePort();
    std::ofstream(dir_ + "/egress.textproto") << "policy { allow_cidrs: \"127.0.0.0/8\" }\n";
    WriteHosts(3);
    for (int i = 0; i < 3; ++i) StartReplica();
  }
  void TearDown() override {
    replicas_.clear();
    nginx_.reset();
    // The replicas' and clients' logs, for a failure's post-mortem (test.outputs).
    const char* outputs = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR");
    if (HasFailure() && outputs) {
      int status = -1;
      RunShell(absl::StrCat("cp ", dir_, "/*.log ", outputs, "/"), &status);
    }
  }

  // /etc/hosts naming the first `replicas` replicas egress.test, and the languages'
  // upstream hosts 127.0.0.1. A new file mounted over the last one: a reader sees the old
  // file or the new one, never one half written.
  void WriteHosts(int replicas) {
    const std::string path = absl::StrCat(dir_, "/hosts.", ++hosts_version_);
    std::ofstream hosts(path);
    hosts << "127.0.0.1 localhost\n";
    for (const std::string& language : kLanguages) hosts << "127.0.0.1 " << language << ".test\n";
    hosts << "127.0.0.1 pick.test\n127.0.0.1 slow.test\n";
    for (int i = 0; i < replicas; ++i) hosts << "127.0.0." << 11 + i << " " << kName << "\n";
    hosts.close();
    int status = -1;
    const std::string output =
        RunShell(absl::StrCat("mount --bind ", path, " /etc/hosts 2>&1"), &status);
    ASSERT_EQ(status, 0) << output;
  }

  void StartReplica() {
    const int index = static_cast<int>(replicas_.size());
    Replica replica;
    replica.ip = absl::StrCat("127.0.0.", 11 + index);
    replica.process = std::make_unique<EgressdProcess>(
        Runfile("service/egressd"), dir_ + "/egress.textproto",
        absl::StrCat(dir_, "/egressd-", index + 1, ".log"),
        std::vector<std::string>{absl::StrCat("--grpc_listen=", replica.ip, ":", port_),
                                 absl::StrCat("--grpc_max_connection_age=", absl::FormatDuration(kAge)),
                                 absl::StrCat("--grpc_max_connection_age_grace=",
                                              absl::FormatDuration(kGrace)),
                                 "--shutdown_grace=5s"});
    ASSERT_TRUE(WaitForPort(replica.process->metrics_port(), 30));
    ASSERT_TRUE(WaitForPort(replica.process->admin_port(), 5));
    ASSERT_TRUE(WaitForAddress(replica.ip, port_, 5)) << replica.ip;
    replicas_.push_back(std::move(replica));
  }

  std::string Target() const { return absl::StrCat("dns:///", kName, ":", port_); }
  std::string Url(const std::string& host, const std::string& path = "/cl/1k") const {
    return absl::StrCat("http://", host, ":", nginx_->http_port(), path);
  }

  // The sum of replica `index`'s samples of `metric` whose labels include all of
  // `labels` (e.g. {"state=\"active\""}) and origin `host`; -1 when its metrics cannot
  // be read.
  int64_t Metric(size_t index, const std::string& metric, const std::string& host,
                 const std::vector<std::string>& labels = {}) const {
    auto reply = HttpGet(replicas_[index].process->metrics_port(), "/metrics");
    if (!reply.ok() || reply->status != 200) return -1;
    const std::string origin =
        absl::StrCat("origin=\"http://", host, ":", nginx_->http_port(), "\"");
    int64_t total = 0;
    for (absl::string_view line : absl::StrSplit(reply->body, '\n')) {
      if (!absl::StartsWith(line, metric + "{") || !absl::StrContains(line, origin)) continue;
      bool match = true;
      for (const std::string& label : labels) match = match && absl::StrContains(line, label);
      double value = 0;
      if (match && absl::SimpleAtod(line.substr(line.rfind(' ') + 1), &value)) {
        total += static_cast<int64_t>(value);
      }
    }
    return total;
  }
  // Upstream requests replica `index` made for `host` (egress_upstream_requests_total,
  // summed over its connection label).
  int64_t Calls(size_t index, const std::string& host) const {
    return Metric(index, "egress_upstream_requests_total", host);
  }
  // Calls(index, "<language>.test") of every language on replicas [0, replicas).
  std::map<std::string, std::vector<int64_t>> Snapshot(size_t replicas) const {
    std::map<std::string, std::vector<int64_t>> calls;
    for (const std::string& language : kLanguages) {
      for (size_t i = 0; i < replicas; ++i) calls[language].push_back(Calls(i, language + ".test"));
    }
    return calls;
  }

  // The Python and Node clients, each in a child process of its own.
  std::unique_ptr<ChildProcess> StartPython() {
    int status = -1;
    const std::string stubs = dir_ + "/python-stubs";
    const std::string output =
        RunShell(absl::StrCat(Runfile("client/python/generate.sh"), " ", stubs, " 2>&1"), &status);
    EXPECT_EQ(status, 0) << output;
    return std::make_unique<ChildProcess>(
        std::vector<std::string>{"/usr/bin/python3", Runfile("tests/e2e/replicas_load.py"), stubs,
                                 Runfile("client/python"), Target(), Url("python.test"),
                                 StopFile()},
        dir_ + "/python.log");
  }
  std::unique_ptr<ChildProcess> StartNode() {
    const char* npm_dir = std::getenv("EGRESS_NPM_DIR");
    setenv("NODE_PATH", absl::StrCat(npm_dir ? npm_dir : "/opt/egress-npm", "/node_modules").c_str(),
           1);
    setenv("EGRESS_PROTO_ROOT", Runfile("proto").c_str(), 1);
    return std::make_unique<ChildProcess>(
        std::vector<std::string>{"node", Runfile("tests/e2e/replicas_load.js"),
                                 Runfile("client/node"), Target(), Url("node.test"), StopFile()},
        dir_ + "/node.log");
  }
  // The Go and Java load clients, compiled once (at the same time: 2 cores), before any
  // load starts: client/go/generate.sh's GOPATH and client/java/build.sh's classes, as
  // tests/e2e/clients_test builds them (with the build caches it shares). The Go one is built with
  // cgo for GODEBUG=netdns=cgo (see replicas_load.go).
  void BuildGoAndJava() {
    const std::string gopath = dir_ + "/gopath";
    const std::string go_env = absl::StrCat(
        "GO111MODULE=off GOPATH=", gopath, ":/usr/share/gocode GOPROXY=off GOFLAGS= GOENV=off ",
        "GOTOOLCHAIN=local CGO_ENABLED=1 GOCACHE=\"${EGRESS_CLIENT_BUILD_CACHE:-", dir_,
        "}/go-build\" HOME=", dir_, " ");
    const std::string go_build = absl::StrCat(
        Runfile("client/go/generate.sh"), " ", gopath, " && cd ", gopath, " && ", go_env,
        "go build -o ", dir_, "/replicas_load_go ", Runfile("tests/e2e/replicas_load.go"));
    const std::string java_build =
        absl::StrCat(Runfile("tests/e2e/java_client_build.sh"), " ", dir_, "/java");
    int status = -1;
    const std::string output = RunShell(
        absl::StrCat("(", go_build, ") > ", dir_, "/go-build.log 2>&1 & go=$!; (", java_build,
                     ") > ", dir_, "/java-build.log 2>&1; java=$?; wait $go; go=$?; ",
                     "echo go=$go java=$java; cat ", dir_, "/go-build.log ", dir_, "/java-build.log"),
        &status);
    ASSERT_EQ(status, 0) << output;
    ASSERT_TRUE(absl::StartsWith(output, "go=0 java=0")) << output;
  }
  std::unique_ptr<ChildProcess> StartGo() {
    return std::make_unique<ChildProcess>(
        std::vector<std::string>{"env", "GODEBUG=netdns=cgo", dir_ + "/replicas_load_go", Target(),
                                 Url("go.test"), StopFile()},
        dir_ + "/go.log");
  }
  std::unique_ptr<ChildProcess> StartJava() {
    std::ifstream file(dir_ + "/java/classpath");
    std::string classpath;
    std::getline(file, classpath);
    return std::make_unique<ChildProcess>(
        std::vector<std::string>{"java", "-cp", classpath, "-Dnetworkaddress.cache.ttl=0",
                                 "-Dsun.net.inetaddr.ttl=0", Runfile("tests/e2e/ReplicasLoad.java"),
                                 Target(), Url("java.test"), StopFile()},
        dir_ + "/java.log");
  }
  std::string StopFile() const { return dir_ + "/stop"; }

  // A child's result: the last line of its log, {"ok": N, "failed": N, "errors": [...]}.
  LoadResult ChildResult(ChildProcess& child, const std::string& log) {
    EXPECT_EQ(child.Wait(), 0) << log;
    std::ifstream file(log);
    std::string line, last;
    while (std::getline(file, line)) {
      if (!line.empty()) last = line;
    }
    google::protobuf::Struct result;
    EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(last, &result).ok()) << last;
    LoadResult load;
    load.ok = static_cast<int64_t>(result.fields().at("ok").number_value());
    load.failed = static_cast<int64_t>(result.fields().at("failed").number_value());
    load.errors = last;
    return load;
  }

  std::string dir_;
  int port_ = 0;
  int hosts_version_ = 0;
  std::unique_ptr<NginxUpstream> nginx_;
  std::vector<Replica> replicas_;
};

TEST_F(ReplicasTest, CallsSpreadOverEveryReplicaANewOneJoinsAndAStoppedOneLosesNone) {
  const int scale = TestTimeScale();
  ASSERT_NO_FATAL_FAILURE(BuildGoAndJava());

  // A caller's own policy wins over the default: pick_first sends every call to one.
  {
    ClientOptions options;
    options.target = Target();
    options.channel_args.SetLoadBalancingPolicyName("pick_first");
    EgressClient pick_first(options);
    for (int i = 0; i < 30; ++i) ASSERT_TRUE(pick_first.Fetch(Url("pick.test")).ok()) << i;
    int64_t busiest = 0;
    for (size_t r = 0; r < 3; ++r) busiest = std::max(busiest, Calls(r, "pick.test"));
    EXPECT_EQ(busiest, 30) << "pick_first spread its calls";
  }

  CppLoad cpp(Target(), Url("cpp.test"));
  std::unique_ptr<ChildProcess> python = StartPython();
  std::unique_ptr<ChildProcess> node = StartNode();
  std::unique_ptr<ChildProcess> go = StartGo();
  std::unique_ptr<ChildProcess> java = StartJava();
  const auto total = [](const std::vector<int64_t>& calls) {
    int64_t sum = 0;
    for (int64_t n : calls) sum += n;
    return sum;
  };

  // 1. Each client's calls spread over the three replicas: counted over a window that
  // starts once every client is under way and holds 90 calls or more of each.
  ASSERT_TRUE(Eventually(absl::Seconds(30 * scale), [&] {
    for (const auto& [language, calls] : Snapshot(3)) {
      if (total(calls) < 1) return false;
    }
    return true;
  })) << "a client made no call";
  const auto before = Snapshot(3);
  std::map<std::string, std::vector<int64_t>> window;
  ASSERT_TRUE(Eventually(absl::Seconds(30 * scale), [&] {
    const auto now = Snapshot(3);
    for (const std::string& language : kLanguages) {
      window[language].clear();
      for (size_t r = 0; r < 3; ++r) {
        window[language].push_back(now.at(language)[r] - before.at(language)[r]);
      }
      if (total(window[language]) < 90) return false;
    }
    return true;
  }));
  for (const std::string& language : kLanguages) {
    const std::vector<int64_t>& calls = window[language];
    for (size_t r = 0; r < 3; ++r) {
      // round_robin: a third each; a reconnection after a GOAWAY skews it a little.
      EXPECT_GE(calls[r] * 6, total(calls))
          << language << ": replica " << r + 1 << " got " << calls[r] << " of " << total(calls);
    }
    std::cout << language << " over replicas 1-3: " << calls[0] << ", " << calls[1] << ", "
              << calls[2] << std::endl;
  }

  // 2. A fourth replica joins the name under load: every client sends it calls within
  // the connection age (+10 % jitter) plus its grace, and a margin.
  StartReplica();
  WriteHosts(4);
  const absl::Time joined = absl::Now();
  const absl::Duration bound = (kAge * 1.1 + kGrace + absl::Seconds(2)) * scale;
  std::map<std::string, absl::Duration> first_call;
  Eventually(bound, [&] {
    for (const std::string& language : kLanguages) {
      if (!first_call.count(language) && Calls(3, language + ".test") > 0) {
        first_call[language] = absl::Now() - joined;
      }
    }
    return first_call.size() == kLanguages.size();
  });
  for (const std::string& language : kLanguages) {
    EXPECT_GT(Calls(3, language + ".test"), 0)
        << language << ": no call reached the new replica within " << bound;
    if (first_call.count(language)) {
      std::cout << language << ": first call on the new replica after " << first_call[language]
                << std::endl;
    }
  }

  // 3. Replica 1 gets SIGTERM under load, with a fetch of a slow upstream (0.3 s to its
  // headers) under way there: it answers that one and exits 0; until it does, gRPC's
  // library server refuses new fetches (UNAVAILABLE, SHUTTING_DOWN) on connections it has
  // not yet sent GOAWAY, which the clients retry on the next replica (the loops send every
  // connection its GOAWAY at once). No client sees a failed call.
  ClientOptions direct;
  direct.target = absl::StrCat(replicas_[0].ip, ":", port_);
  EgressClient replica_1(direct);
  absl::StatusOr<egress::v1::FetchResponse> slow;
  std::thread slow_fetch([&] { slow = replica_1.Fetch(Url("slow.test", "/slow-300ms")); });
  ASSERT_TRUE(Eventually(absl::Seconds(10 * scale), [&] {
    return Metric(0, "egress_pool_connections", "slow.test", {"state=\"active\""}) > 0;
  })) << "the slow fetch did not start";
  const auto at_sigterm = Snapshot(4);
  std::cout << "SIGTERM at " << absl::FormatTime("%H:%M:%E3S", absl::Now(), absl::UTCTimeZone()) << std::endl;
  ASSERT_EQ(replicas_[0].process->process().Signal(SIGTERM), 0);
  EXPECT_EQ(replicas_[0].process->process().Wait(), 0);
  const absl::Time stopped = absl::Now();
  slow_fetch.join();
  ASSERT_TRUE(slow.ok()) << slow.status();
  EXPECT_EQ(slow->status_code(), 200);
  // Every client goes on, on the other three.
  EXPECT_TRUE(Eventually(absl::Seconds(10 * scale), [&] {
    for (const std::string& language : kLanguages) {
      int64_t more = 0;
      for (size_t r = 1; r < 4; ++r) {
        more += Calls(r, language + ".test") - at_sigterm.at(language)[r];
      }
      if (more < 30) return false;
    }
    return true;
  }));
  absl::SleepFor(absl::Seconds(1) - (absl::Now() - stopped));  // calls to a gone address too

  std::ofstream(StopFile()) << "stop\n";
  const LoadResult cpp_result = cpp.Stop();
  const LoadResult python_result = ChildResult(*python, dir_ + "/python.log");
  const LoadResult node_result = ChildResult(*node, dir_ + "/node.log");
  const LoadResult go_result = ChildResult(*go, dir_ + "/go.log");
  const LoadResult java_result = ChildResult(*java, dir_ + "/java.log");
  for (const auto& [language, result] :
       std::vector<std::pair<std::string, LoadResult>>{{"cpp", cpp_result},
                                                       {"python", python_result},
                                                       {"node", node_result},
                                                       {"go", go_result},
                                                       {"java", java_result}}) {
    EXPECT_EQ(result.failed, 0) << language << ": " << result.errors;
    EXPECT_GT(result.ok, 100) << language;
    std::cout << language << ": " << result.ok << " calls, " << result.failed << " failed"
              << std::endl;
  }
  // The clients' retries were put to work: replica 1 refused fetches while stopping
  // (its access log has a line for each).
  int status = -1;
  const std::string refused = RunShell(
      absl::StrCat("grep -c '\"error_reason\":\"SHUTTING_DOWN\"' ",
                   replicas_[0].process->log_file()),
      &status);
  int64_t refusals = 0;
  EXPECT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(refused), &refusals)) << refused;
  // On the loops every connection gets its GOAWAY at SIGTERM, and a call that races it is
  // refused at HTTP/2 (REFUSED_STREAM), which gRPC's clients send again themselves: no
  // fetch is left to refuse, and none failed (above) is what holds.
  if (DataPlaneUnderTest() == "grpc_library") {
    EXPECT_GT(refusals, 0) << "replica 1 refused nothing: the retries went untested";
  }
  std::cout << "replica 1 refused " << refusals << " fetches while stopping" << std::endl;
}

}  // namespace
}  // namespace egress::testing
