#include "service/access_log/access_log.h"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "boost/url/parse.hpp"
#include "boost/url/url.hpp"
#include "service/access_log/access_log_json.h"
#include "service/base/error_reason.h"

namespace egress {
namespace {

// How long the writer lets entries gather once it is busy: one write per batch, and no
// wake-up per fetch.
constexpr absl::Duration kBatchInterval = absl::Milliseconds(50);
// The most a written batch's buffer keeps for the next one; a burst's is freed.
constexpr size_t kKeptBatchBytes = 256 * 1024;
// The most a thread's line buffer keeps for its next line (room for a line is made for
// its worst case, six bytes per byte of text: a long line's is freed).
constexpr size_t kKeptLineBytes = 64 * 1024;
// How long a blocked sink may hold up egressd's exit.
constexpr absl::Duration kFlushOnExit = absl::Seconds(1);

// Whether a write to `fd` can wait for a reader: not on a file, nor with O_NONBLOCK.
bool MayBlock(int fd) {
  struct stat sink;
  if (fstat(fd, &sink) == 0 && S_ISREG(sink.st_mode)) return false;
  return (fcntl(fd, F_GETFL) & O_NONBLOCK) == 0;
}

}  // namespace

absl::StatusOr<std::unique_ptr<AccessLog>> AccessLog::Open(const std::string& destination,
                                                           AccessLogObserver& observer) {
  if (destination == "-") {
    // A pipe or a terminal is opened again, non-blocking, so that a reader that stops
    // reading can never hold a write (and egressd's exit); a file cannot block.
    struct stat sink;
    if (fstat(STDOUT_FILENO, &sink) == 0 && !S_ISREG(sink.st_mode)) {
      const int fd = open("/proc/self/fd/1", O_WRONLY | O_NONBLOCK | O_CLOEXEC);
      if (fd >= 0) return std::unique_ptr<AccessLog>(new AccessLog(fd, true, observer));
    }
    return std::unique_ptr<AccessLog>(new AccessLog(STDOUT_FILENO, false, observer));
  }
  const int fd = open(destination.c_str(),
                      O_WRONLY | O_CREAT | O_APPEND | O_NONBLOCK | O_CLOEXEC, 0640);
  if (fd < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--access_log: cannot open \"", destination,
                                                   "\": ", std::strerror(errno)));
  }
  return std::unique_ptr<AccessLog>(new AccessLog(fd, true, observer));
}

AccessLog::AccessLog(int fd, bool owned, AccessLogObserver& observer)
    : fd_(fd),
      owned_(owned),
      blocking_(MayBlock(fd)),
      observer_(observer),
      writer_([this] { Run(); }) {}

AccessLog::~AccessLog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  give_up_ = absl::Now() + kFlushOnExit;
  stop_writing_ = true;  // after give_up_, which WriteAll reads once it sees this
  wake_.notify_one();
  writer_.join();
  if (owned_) close(fd_);
}

namespace {

// A URL read as text, for one that does not parse (or parses as something else):
// "REDACTED" for what precedes its last '@' after the scheme's "://" (when that comes
// before any '@'), and no query (unless kept) or fragment. When one of those begins
// before that '@', the '@' may be in it, so what follows the '@' goes too.
std::string RedactedText(absl::string_view url, bool keep_query) {
  const size_t cut = url.find_first_of(keep_query ? "#" : "?#");
  const size_t at = url.rfind('@');
  if (at == absl::string_view::npos) return std::string(url.substr(0, cut));
  const size_t scheme_end = url.find("://");
  const size_t from = scheme_end < url.find('@') ? scheme_end + 3 : 0;
  if (cut < from) return std::string(url.substr(0, cut));
  const absl::string_view rest = cut < at ? "" : url.substr(at + 1, cut - at - 1);
  return absl::StrCat(url.substr(0, from), "REDACTED@", rest);
}

// Whether the parser's userinfo is less than the caller may have meant, which is all
// before the authority's last '@' when the authority is read as text (up to its first
// '/'): "http://u:p#w@h/" parses as host "u" and a fragment, "http://u@v:p@h/" as
// userinfo "u", "u:p@h/x" as scheme "u" and a path.
bool HidesUserinfo(absl::string_view url, const boost::urls::url_view& parsed) {
  if (!parsed.has_authority()) return url.find('@') != absl::string_view::npos;
  // A parsed URL with an authority is [scheme ":"] "//" authority ...
  const size_t start = (parsed.has_scheme() ? parsed.scheme().size() + 1 : 0) + 2;
  const absl::string_view authority = url.substr(start, url.find('/', start) - start);
  const size_t at = authority.rfind('@');
  if (at == absl::string_view::npos) return false;
  return !parsed.has_userinfo() || parsed.encoded_userinfo().size() != at;
}

}  // namespace

std::string AccessLog::LoggedUrl(const std::string& url, bool keep_query) {
  // Nothing to redact or drop (the common case): as it is, without a parse.
  if (url.size() <= kMaxLoggedBytes && url.find_first_of("@?#") == std::string::npos) {
    return url;
  }
  auto parsed = boost::urls::parse_uri_reference(url);
  if (!parsed || HidesUserinfo(url, *parsed)) return LoggedText(RedactedText(url, keep_query));
  boost::urls::url logged(*parsed);
  if (logged.has_userinfo()) logged.set_userinfo("REDACTED");
  if (logged.has_query() && !keep_query) logged.set_encoded_query("REDACTED");
  logged.remove_fragment();  // never sent upstream
  return LoggedText(std::string(logged.buffer()));
}

// Its start, marked as cut: a URL may be megabytes and still parse.
std::string AccessLog::LoggedText(std::string text) {
  if (text.size() > kMaxLoggedBytes) text.replace(kMaxLoggedBytes, std::string::npos, "...");
  return text;
}

std::string AccessLog::LoggedMessage(const absl::Status& error, bool keep_query) {
  std::string logged(error.message());
  if (const auto url = transport::QuotedUrlOf(error)) {
    absl::StrReplaceAll({{transport::Quoted(*url), transport::Quoted(LoggedUrl(*url, keep_query))}},
                        &logged);
  }
  // Cut after the URL's redaction, which must see the whole quote.
  if (logged.size() > kMaxLoggedBytes) logged.resize(kMaxLoggedBytes);
  return logged;
}

bool AccessLog::Sampled(double ratio) {
  thread_local std::mt19937_64 random(std::random_device{}());
  return std::uniform_real_distribution<double>(0.0, 1.0)(random) < ratio;
}

bool AccessLog::TakeToken(uint32_t per_second) {
  rate_cap_.Refill(absl::Now(), per_second, per_second);
  return rate_cap_.TryTake();
}

void AccessLog::Submit(const egress::v1::AccessLogEntry& entry,
                       const AccessLogSettings& settings) {
  const bool always = entry.grpc_code() != "OK" || entry.policy_decision() != "allow";
  if (!always && settings.sample_ratio < 1.0 && !Sampled(settings.sample_ratio)) return;
  // Serialized here, outside the lock, into a buffer each thread keeps (no allocation
  // once it has grown to a line's size; one a long line grew is let go).
  thread_local std::string line;
  line.clear();
  AppendAccessLogJson(entry, &line);
  line.push_back('\n');
  std::optional<AccessLogDrop> dropped;
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (settings.max_lines_per_second > 0 && !TakeToken(settings.max_lines_per_second)) {
      dropped = AccessLogDrop::kRateLimited;
    } else if (queued_lines_ >= settings.queue_lines) {
      dropped = AccessLogDrop::kQueueFull;
    } else {
      queued_.append(line);
      ++queued_lines_;
      wake = std::exchange(writer_idle_, false);
    }
  }
  if (line.capacity() > kKeptLineBytes) std::string().swap(line);
  if (dropped) return observer_.OnAccessLogDropped(*dropped, 1);
  if (wake) wake_.notify_one();
}

void AccessLog::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  std::string batch;
  for (;;) {
    if (queued_lines_ == 0 && !stopping_) {
      writer_idle_ = true;
      wake_.wait(lock, [&] { return stopping_ || queued_lines_ > 0; });
      // More entries come with the first while the writer is busy: let them gather.
      if (!stopping_) wake_.wait_for(lock, absl::ToChronoMilliseconds(kBatchInterval),
                                     [&] { return stopping_; });
    }
    if (queued_lines_ == 0) return;  // stopping, and all written
    // The two buffers trade places: each keeps its capacity for the next batch.
    batch.clear();
    batch.swap(queued_);
    const size_t lines = std::exchange(queued_lines_, 0);
    lock.unlock();

    if (WriteAll(batch)) {
      observer_.OnAccessLogWritten(lines);
    } else {
      observer_.OnAccessLogDropped(AccessLogDrop::kWriteError, lines);
    }
    if (batch.capacity() > kKeptBatchBytes) batch = std::string();  // after a burst
    lock.lock();
    if (!stopping_ && queued_lines_ > 0) {
      wake_.wait_for(lock, absl::ToChronoMilliseconds(kBatchInterval), [&] { return stopping_; });
    }
  }
}

bool AccessLog::WriteAll(const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    if (stop_writing_ && absl::Now() >= give_up_) return false;
    // Waits until the sink takes bytes, a tenth of a second at a time (so that stopping
    // is noticed). A descriptor that blocks (a standard output that could not be opened
    // again) is given at most PIPE_BUF, which a pipe with room takes whole; one that does
    // not takes what it can.
    pollfd ready{fd_, POLLOUT, 0};
    const int polled = poll(&ready, 1, 100);
    if (polled < 0 && errno != EINTR) return false;
    if (polled <= 0) continue;
    if (ready.revents & (POLLERR | POLLHUP | POLLNVAL)) return false;
    const size_t chunk = blocking_ ? std::min<size_t>(text.size() - done, PIPE_BUF)
                                   : text.size() - done;
    const ssize_t wrote = write(fd_, text.data() + done, chunk);
    if (wrote < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return false;
    }
    done += static_cast<size_t>(wrote);
  }
  return true;
}

}  // namespace egress
