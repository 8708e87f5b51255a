// The process metrics and egress_build_info: egressd in its own process, /metrics
// scraped over HTTP, each value checked against what /proc says of that process right
// then; and ProcessMetrics on a /proc that is missing or of the test's own making.
#include <dirent.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "egress/v1/egress.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/metrics/process_metrics.h"
#include "service/metrics/version.h"
#include "tests/support/egressd_process.h"
#include "tests/support/http_get.h"

namespace egress::testing {
namespace {

// The soft descriptor limit egressd is started with: systemd's and many shells' default,
// which egressd raises to the hard limit (or it would refuse callers and scrapes past it).
constexpr rlim_t kChildSoftLimit = 1024;

std::string ReadFile(const std::string& path) {
  std::ifstream file(path);
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

// The number of descriptors a process holds: the entries of /proc/<pid>/fd.
int DescriptorsOf(pid_t pid) {
  DIR* dir = opendir(absl::StrCat("/proc/", pid, "/fd").c_str());
  if (dir == nullptr) return -1;
  int count = 0;
  while (const dirent* entry = readdir(dir)) count += entry->d_name[0] != '.';
  closedir(dir);
  return count;
}

// user + system CPU ticks of a process: fields 14 and 15 of /proc/<pid>/stat.
uint64_t CpuTicksOf(pid_t pid) {
  const std::string stat = ReadFile(absl::StrCat("/proc/", pid, "/stat"));
  const std::vector<std::string> fields =
      absl::StrSplit(stat.substr(stat.rfind(')') + 2), ' ');
  uint64_t user = 0, system = 0;
  EXPECT_TRUE(absl::SimpleAtoi(fields.at(11), &user) && absl::SimpleAtoi(fields.at(12), &system))
      << stat;
  return user + system;
}

// The value after "<key>:" in /proc/<pid>/status, in bytes (the file says kB).
double StatusBytes(pid_t pid, const std::string& key) {
  const std::string status = ReadFile(absl::StrCat("/proc/", pid, "/status"));
  for (absl::string_view line : absl::StrSplit(status, '\n')) {
    double kib = 0;
    if (absl::ConsumePrefix(&line, key + ":") &&
        absl::SimpleAtod(absl::StripSuffix(absl::StripAsciiWhitespace(line), " kB"), &kib)) {
      return kib * 1024;
    }
  }
  ADD_FAILURE() << "no " << key << " in /proc/" << pid << "/status";
  return -1;
}

// The soft limit of "Max open files" in /proc/<pid>/limits.
double SoftDescriptorLimitOf(pid_t pid) {
  const std::string limits = ReadFile(absl::StrCat("/proc/", pid, "/limits"));
  for (absl::string_view line : absl::StrSplit(limits, '\n')) {
    if (!absl::ConsumePrefix(&line, "Max open files")) continue;
    const std::vector<absl::string_view> columns = absl::StrSplit(line, ' ', absl::SkipEmpty());
    double soft = 0;
    if (!columns.empty() && absl::SimpleAtod(columns[0], &soft)) return soft;
  }
  ADD_FAILURE() << "no Max open files in /proc/" << pid << "/limits";
  return -1;
}

// The value of the sample line that starts with `series` (name, and labels if any) on a
// metrics page; nullopt when there is none.
std::optional<double> Sample(const std::string& page, const std::string& series) {
  for (absl::string_view line : absl::StrSplit(page, '\n')) {
    double value = 0;
    if (absl::ConsumePrefix(&line, series) && absl::ConsumePrefix(&line, " ") &&
        absl::SimpleAtod(line, &value)) {
      return value;
    }
  }
  return std::nullopt;
}

class ProcessMetricsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const char* tmp = std::getenv("TEST_TMPDIR");
    dir_ = absl::StrCat(tmp ? tmp : "/tmp", "/process-metrics-test-", getpid());
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ + "/egress.textproto") << "# built-in defaults\n";

    // egressd inherits the soft descriptor limit set here; the test's own is put back.
    rlimit own{};
    ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &own), 0);
    ASSERT_GE(own.rlim_max, kChildSoftLimit);
    rlimit child = own;
    child.rlim_cur = kChildSoftLimit;
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &child), 0);
    started_ = absl::Now();
    // The config file is polled rarely: each poll opens it, a descriptor that comes and
    // goes in the middle of a scrape.
    egressd_ = std::make_unique<EgressdProcess>(Runfile("service/egressd"),
                                                dir_ + "/egress.textproto", dir_ + "/egressd.log",
                                                std::vector<std::string>{"--config_poll=1h"});
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &own), 0);
    ASSERT_TRUE(egressd_->WaitUntilListening()) << ReadFile(egressd_->log_file());
  }

  static void TearDownTestSuite() { egressd_.reset(); }

  static pid_t pid() { return egressd_->process().pid(); }

  static std::string Scrape() {
    auto page = HttpGet(egressd_->metrics_port(), "/metrics");
    EXPECT_TRUE(page.ok()) << page.status();
    if (!page.ok()) return "";
    EXPECT_EQ(page->status, 200);
    return page->body;
  }

  // Scrapes while egressd's descriptors hold still (after start, the accepted readiness
  // probes of WaitUntilListening close one by one), and returns process_open_fds and how
  // many entries /proc/<pid>/fd had before and after the scrape (the same).
  static std::pair<double, int> ScrapeOpenFds() {
    for (int attempt = 0; attempt < 20; ++attempt) {
      const int before = DescriptorsOf(pid());
      const std::optional<double> reported = Sample(Scrape(), "process_open_fds");
      absl::SleepFor(absl::Milliseconds(100));  // for the scrape's connection to close
      if (reported && DescriptorsOf(pid()) == before) return {*reported, before};
    }
    ADD_FAILURE() << "egressd's descriptors never held still around a scrape";
    return {-1, -1};
  }

  static inline std::string dir_;
  static inline std::unique_ptr<EgressdProcess> egressd_;
  static inline absl::Time started_;
};

TEST_F(ProcessMetricsTest, OpenFdsIsWhatProcFdListsPlusTheScrapesOwnConnection) {
  // While egressd serves the scrape it holds one descriptor more than before and after
  // it: the accepted connection of that scrape. A descriptor held for a moment by another
  // thread (a TSan run saw one) may fall inside a scrape: one of 20 must match exactly.
  double reported = -1;
  int listed = -1;
  for (int attempt = 0; attempt < 20 && reported != listed + 1; ++attempt) {
    std::tie(reported, listed) = ScrapeOpenFds();
  }
  EXPECT_EQ(reported, listed + 1);
}

TEST_F(ProcessMetricsTest, OpenFdsFollowsConnectionsAcceptedByEgressd) {
  const double before = ScrapeOpenFds().first;
  const int listed = DescriptorsOf(pid());
  std::vector<int> sockets;
  for (int i = 0; i < 10; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(egressd_->grpc_port()));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)), 0);
    sockets.push_back(fd);
  }
  // gRPC accepts them at once and keeps them for its handshake timeout (minutes).
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (DescriptorsOf(pid()) < listed + 10 && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(ScrapeOpenFds().first, before + 10);
  for (int fd : sockets) close(fd);
}

TEST_F(ProcessMetricsTest, MaxFdsIsEgressdsSoftDescriptorLimitRaisedToTheHardOne) {
  rlimit own{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &own), 0);  // egressd's hard limit is the test's
  ASSERT_GT(own.rlim_max, kChildSoftLimit) << "the test needs a hard limit above 1,024";
  const std::optional<double> reported = Sample(Scrape(), "process_max_fds");
  ASSERT_TRUE(reported);
  EXPECT_EQ(*reported, SoftDescriptorLimitOf(pid()));
  EXPECT_EQ(*reported, static_cast<double>(own.rlim_max));
}

// Sockets the test holds open to egressd; closed however the test ends.
struct HeldSockets {
  ~HeldSockets() {
    for (int fd : fds) close(fd);
  }
  std::vector<int> fds;
};

// Started with a soft limit of 1,024, egressd still answers a scrape (and callers) while
// 1,200 connections are open to it: before, the scrape waited until it timed out. They
// come from two loopback addresses, each within --grpc_max_connections_per_source.
TEST_F(ProcessMetricsTest, ScrapesAreAnsweredWhileMoreCallersAreConnectedThanTheLimitItStartedWith) {
  constexpr int kConnections = 1200;
  rlimit own{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &own), 0);
  if (own.rlim_max < kConnections + 200) GTEST_SKIP() << "needs a hard limit of 1,400 descriptors";
  const rlim_t own_soft = own.rlim_cur;
  own.rlim_cur = own.rlim_max;  // the test's own sockets
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &own), 0);
  const int baseline = DescriptorsOf(pid());
  {
    HeldSockets sockets;
    for (int i = 0; i < kConnections; ++i) {
      const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      ASSERT_GE(fd, 0);
      sockets.fds.push_back(fd);
      sockaddr_in address{};
      address.sin_family = AF_INET;
      address.sin_port = htons(static_cast<uint16_t>(egressd_->grpc_port()));
      sockaddr_in source{};
      source.sin_family = AF_INET;
      source.sin_addr.s_addr = htonl(INADDR_LOOPBACK + i % 2);  // 127.0.0.1 and 127.0.0.2
      ASSERT_EQ(bind(fd, reinterpret_cast<const sockaddr*>(&source), sizeof(source)), 0);
      address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      ASSERT_EQ(connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)), 0);
    }
    const absl::Time give_up = absl::Now() + absl::Seconds(20);
    // Past the 1,024 it started with (the baseline itself may count a descriptor that
    // comes and goes: the exact sum is not the point).
    while (DescriptorsOf(pid()) < kConnections && absl::Now() < give_up) {
      absl::SleepFor(absl::Milliseconds(10));
    }
    EXPECT_GE(DescriptorsOf(pid()), kConnections) << "egressd did not accept them";
    const std::optional<double> open = Sample(Scrape(), "process_open_fds");
    ASSERT_TRUE(open);
    EXPECT_GE(*open, kConnections);
  }
  // egressd closes each as it sees it go: the tests after this one count from its baseline.
  const absl::Time give_up = absl::Now() + absl::Seconds(20);
  while (DescriptorsOf(pid()) > baseline && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_LE(DescriptorsOf(pid()), baseline + 1);
  own.rlim_cur = own_soft;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &own), 0);
}

TEST_F(ProcessMetricsTest, StartTimeIsWhenTheTestStartedEgressd) {
  const std::optional<double> reported = Sample(Scrape(), "process_start_time_seconds");
  ASSERT_TRUE(reported);
  // Boot time (btime) is in whole seconds; the wall clock and the boot clock may have
  // drifted apart by a little since boot.
  EXPECT_NEAR(*reported, absl::ToDoubleSeconds(started_ - absl::UnixEpoch()), 3);
}

TEST_F(ProcessMetricsTest, ResidentAndVirtualMemoryAreWhatProcStatusSays) {
  const std::string page = Scrape();
  const double rss = StatusBytes(pid(), "VmRSS");
  const double vsize = StatusBytes(pid(), "VmSize");
  const std::optional<double> resident = Sample(page, "process_resident_memory_bytes");
  const std::optional<double> virtual_bytes = Sample(page, "process_virtual_memory_bytes");
  ASSERT_TRUE(resident && virtual_bytes);
  EXPECT_NEAR(*resident, rss, rss * 0.1);
  EXPECT_NEAR(*virtual_bytes, vsize, vsize * 0.1);
}

TEST_F(ProcessMetricsTest, CpuSecondsGrowWhileEgressdWorksAndMatchProcStat) {
  const double ticks_per_second = static_cast<double>(sysconf(_SC_CLK_TCK));
  const std::optional<double> idle = Sample(Scrape(), "process_cpu_seconds_total");
  ASSERT_TRUE(idle);
  // Refused fetches (a URL that is not one) until egressd has spent a tenth of a second.
  auto stub = egress::v1::Egress::NewStub(
      grpc::CreateChannel(egressd_->grpc_target(), grpc::InsecureChannelCredentials()));
  const uint64_t work_start = CpuTicksOf(pid());
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (CpuTicksOf(pid()) < work_start + ticks_per_second / 10 && absl::Now() < give_up) {
    for (int i = 0; i < 100; ++i) {
      egress::v1::FetchRequest request;
      request.set_url("not a url");
      egress::v1::FetchResponse response;
      grpc::ClientContext context;
      ASSERT_EQ(stub->Fetch(&context, request, &response).error_code(),
                grpc::StatusCode::INVALID_ARGUMENT);
    }
  }
  const uint64_t before = CpuTicksOf(pid());
  const std::optional<double> busy = Sample(Scrape(), "process_cpu_seconds_total");
  const uint64_t after = CpuTicksOf(pid());
  ASSERT_TRUE(busy);
  // Seconds are ticks / ticks_per_second in doubles: compared within their rounding, far
  // below one tick.
  constexpr double kRounding = 1e-9;
  EXPECT_GE(*busy, *idle + 0.1 - kRounding);
  EXPECT_GE(*busy, before / ticks_per_second - kRounding);
  EXPECT_LE(*busy, after / ticks_per_second + kRounding);
}

TEST_F(ProcessMetricsTest, BuildInfoIsOneAndNamesTheVersion) {
  const std::string page = Scrape();
  const size_t start = page.find("\negress_build_info{");
  ASSERT_NE(start, std::string::npos) << page;
  const size_t labels_start = start + std::string("\negress_build_info{").size();
  const size_t labels_end = page.find('}', labels_start);
  const std::vector<std::string> labels =
      absl::StrSplit(page.substr(labels_start, labels_end - labels_start), ',');
  EXPECT_THAT(labels, ::testing::Contains(absl::StrCat("version=\"", kVersion, "\"")));
  EXPECT_THAT(labels, ::testing::Contains(absl::StrCat("grpc_version=\"", grpc::Version(), "\"")));
  EXPECT_EQ(Sample(page, page.substr(start + 1, labels_end - start)), 1);
}

TEST_F(ProcessMetricsTest, PromtoolAcceptsTheProcessMetrics) {
  const std::string page = Scrape();
  for (const std::string type :
       {"process_cpu_seconds_total counter", "process_resident_memory_bytes gauge",
        "process_virtual_memory_bytes gauge", "process_open_fds gauge", "process_max_fds gauge",
        "process_start_time_seconds gauge", "egress_build_info gauge"}) {
    EXPECT_TRUE(absl::StrContains(page, "# TYPE " + type + "\n")) << type;
  }
  const std::string file = dir_ + "/metrics.txt";
  std::ofstream(file) << page;
  int status = -1;
  const std::string output = RunShell("promtool check metrics < " + file + " 2>&1", &status);
  EXPECT_EQ(status, 0) << output;
}

// What a scrape of a ProcessMetrics reading from `proc` exports, by family name.
std::map<std::string, double> CollectFrom(const std::string& proc) {
  std::map<std::string, double> values;
  for (const auto& family : ProcessMetrics(proc).Collect()) {
    const auto& metric = family.metric.at(0);
    values[family.name] =
        family.type == prometheus::MetricType::Counter ? metric.counter.value : metric.gauge.value;
  }
  return values;
}

TEST(ProcessMetricsUnreadableProcTest, WithoutProcOnlyWhatNeedsNoProcIsExported) {
  const std::map<std::string, double> values = CollectFrom("/nonexistent-proc");
  EXPECT_EQ(values.size(), 2u);
  EXPECT_EQ(values.count("egress_build_info"), 1);
  EXPECT_EQ(values.count("process_max_fds"), 1);
}

TEST(ProcessMetricsUnreadableProcTest, StatWithoutItsFieldsLeavesOutWhatItWouldGive) {
  const std::string proc = absl::StrCat(std::getenv("TEST_TMPDIR"), "/truncated-proc");
  std::filesystem::create_directories(proc + "/self/fd");
  std::ofstream(proc + "/self/stat") << "42 (egressd) S 1 42 42 0 -1 4194560 9";
  std::ofstream(proc + "/stat") << "cpu  1 2 3\nbtime 1700000000\n";
  const std::map<std::string, double> values = CollectFrom(proc);
  EXPECT_EQ(values.count("process_cpu_seconds_total"), 0);
  EXPECT_EQ(values.count("process_resident_memory_bytes"), 0);
  EXPECT_EQ(values.count("process_start_time_seconds"), 0);
  EXPECT_EQ(values.at("process_open_fds"), 0);
}

TEST(ProcessMetricsUnreadableProcTest, CommandNamesWithParenthesesAndSpacesDoNotShiftFields) {
  const std::string proc = absl::StrCat(std::getenv("TEST_TMPDIR"), "/odd-name-proc");
  std::filesystem::create_directories(proc + "/self/fd");
  // Fields 14 and 15 (utime, stime) 250 and 50 ticks, 22 (starttime) 1000 ticks, 23
  // (vsize) 8192000 bytes, 24 (rss) 100 pages.
  std::ofstream(proc + "/self/stat")
      << "42 (a) b (c) S 1 42 42 0 -1 4194560 9 0 0 0 250 50 0 0 20 0 7 0 1000 8192000 100 "
         "18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";
  std::ofstream(proc + "/stat") << "cpu  1 2 3\nbtime 1700000000\nprocesses 9\n";
  for (const char* fd : {"0", "1", "2"}) std::ofstream(proc + "/self/fd/" + fd);
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const std::map<std::string, double> values = CollectFrom(proc);
  EXPECT_EQ(values.at("process_cpu_seconds_total"), 300 / ticks);
  EXPECT_EQ(values.at("process_start_time_seconds"), 1700000000 + 1000 / ticks);
  EXPECT_EQ(values.at("process_virtual_memory_bytes"), 8192000);
  EXPECT_EQ(values.at("process_resident_memory_bytes"), 100.0 * sysconf(_SC_PAGESIZE));
  EXPECT_EQ(values.at("process_open_fds"), 3);
}

}  // namespace
}  // namespace egress::testing
