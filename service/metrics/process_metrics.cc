#include "service/metrics/process_metrics.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <optional>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "grpcpp/grpcpp.h"
#include "prometheus/client_metric.h"
#include "service/base/files.h"
#include "service/metrics/version.h"

namespace egress {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

// __VERSION__ is "12.2.0" from gcc; clang's names the compiler itself.
#if defined(__clang__)
constexpr char kCompiler[] = __VERSION__;
#else
constexpr char kCompiler[] = "gcc " __VERSION__;
#endif

// The fields of /proc/<pid>/stat (proc(5)) that the metrics need, in its units.
struct ProcStat {
  uint64_t user_ticks = 0;
  uint64_t system_ticks = 0;
  uint64_t start_ticks = 0;  // after boot
  uint64_t virtual_bytes = 0;
  uint64_t resident_pages = 0;
};

// The most a /proc file read here may hold: /proc/self/stat is a few hundred bytes;
// /proc/stat a line per CPU and an interrupt line of a few KiB.
constexpr size_t kMaxProcFileBytes = 1 << 20;

std::optional<std::string> ReadFile(const std::string& path) {
  auto text = ReadBoundedFile(path, kMaxProcFileBytes);
  if (!text.ok()) return std::nullopt;
  return *std::move(text);
}

std::optional<ProcStat> ParseStat(absl::string_view text) {
  // Field 2, the command name, is in parentheses and may hold spaces and ')' itself.
  const size_t name_end = text.rfind(')');
  if (name_end == absl::string_view::npos) return std::nullopt;
  const std::vector<absl::string_view> fields =
      absl::StrSplit(text.substr(name_end + 1), ' ', absl::SkipEmpty());
  // Fields by their number in proc(5); fields[0] is field 3.
  auto parse = [&fields](size_t number, uint64_t& value) {
    return number - 3 < fields.size() && absl::SimpleAtoi(fields[number - 3], &value);
  };
  ProcStat stat;
  if (!parse(14, stat.user_ticks) || !parse(15, stat.system_ticks) ||
      !parse(22, stat.start_ticks) || !parse(23, stat.virtual_bytes) ||
      !parse(24, stat.resident_pages)) {
    return std::nullopt;
  }
  return stat;
}

// Seconds since the epoch at boot: the "btime" line of /proc/stat.
std::optional<uint64_t> ParseBootTime(absl::string_view text) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    uint64_t seconds = 0;
    if (absl::ConsumePrefix(&line, "btime ") && absl::SimpleAtoi(line, &seconds)) return seconds;
  }
  return std::nullopt;
}

// The entries of /proc/self/fd, less the descriptor that reads them (the Go and Python
// clients count that one too, one more than the process holds).
std::optional<int> CountOpenDescriptors(const std::string& fd_dir) {
  DIR* dir = opendir(fd_dir.c_str());
  if (dir == nullptr) return std::nullopt;
  const std::string reading = std::to_string(dirfd(dir));
  int count = 0;
  while (true) {
    errno = 0;  // readdir returns null both at the end and on an error
    const dirent* entry = readdir(dir);
    if (entry == nullptr) break;
    const absl::string_view name = entry->d_name;
    count += name != "." && name != ".." && name != reading;
  }
  const bool complete = errno == 0;
  closedir(dir);
  if (!complete) return std::nullopt;
  return count;
}

MetricFamily Gauge(std::string name, std::string help, double value,
                   std::vector<ClientMetric::Label> labels = {}) {
  ClientMetric metric;
  metric.label = std::move(labels);
  metric.gauge.value = value;
  return MetricFamily{std::move(name), std::move(help), MetricType::Gauge, {std::move(metric)}};
}

MetricFamily Counter(std::string name, std::string help, double value) {
  ClientMetric metric;
  metric.counter.value = value;
  return MetricFamily{std::move(name), std::move(help), MetricType::Counter, {std::move(metric)}};
}

}  // namespace

ProcessMetrics::ProcessMetrics(std::string proc) : proc_(std::move(proc)) {}

std::vector<MetricFamily> ProcessMetrics::Collect() const {
  std::vector<MetricFamily> families;
  families.push_back(Gauge("egress_build_info",
                           "Always 1; the labels say which build of egressd this is.", 1,
                           {{"version", kVersion},
                            {"compiler", kCompiler},
                            {"grpc_version", grpc::Version()}}));

  const long ticks_per_second = sysconf(_SC_CLK_TCK);
  const std::optional<std::string> stat_text = ReadFile(proc_ + "/self/stat");
  const std::optional<ProcStat> stat = stat_text ? ParseStat(*stat_text) : std::nullopt;
  if (stat && ticks_per_second > 0) {
    families.push_back(Counter("process_cpu_seconds_total",
                               "Total user and system CPU time spent in seconds.",
                               static_cast<double>(stat->user_ticks + stat->system_ticks) /
                                   ticks_per_second));
  }
  if (stat) {
    families.push_back(Gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.",
                             static_cast<double>(stat->virtual_bytes)));
    families.push_back(Gauge("process_resident_memory_bytes", "Resident memory size in bytes.",
                             static_cast<double>(stat->resident_pages) *
                                 static_cast<double>(sysconf(_SC_PAGESIZE))));
  }
  const std::optional<std::string> proc_stat_text = ReadFile(proc_ + "/stat");
  const std::optional<uint64_t> boot_time =
      proc_stat_text ? ParseBootTime(*proc_stat_text) : std::nullopt;
  if (stat && boot_time && ticks_per_second > 0) {
    families.push_back(Gauge("process_start_time_seconds",
                             "Start time of the process since unix epoch in seconds.",
                             static_cast<double>(*boot_time) +
                                 static_cast<double>(stat->start_ticks) / ticks_per_second));
  }

  if (const std::optional<int> open = CountOpenDescriptors(proc_ + "/self/fd")) {
    families.push_back(Gauge("process_open_fds", "Number of open file descriptors.", *open));
  }
  rlimit descriptors{};
  if (getrlimit(RLIMIT_NOFILE, &descriptors) == 0) {
    families.push_back(Gauge("process_max_fds", "Maximum number of open file descriptors.",
                             static_cast<double>(descriptors.rlim_cur)));
  }
  return families;
}

}  // namespace egress
