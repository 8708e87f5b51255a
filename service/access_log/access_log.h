#ifndef EGRESS_SERVICE_ACCESS_LOG_ACCESS_LOG_H_
#define EGRESS_SERVICE_ACCESS_LOG_ACCESS_LOG_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "egress/v1/egress.pb.h"
#include "service/config/service_config.h"
#include "service/fetch/fetch_observer.h"
#include "service/base/token_bucket.h"

namespace egress {

// One JSON line per entry (egress.v1.AccessLogEntry), written to a file descriptor by a
// thread of its own. Submit never blocks on the sink: it serializes the entry and appends
// the line to a bounded buffer of lines, which the writer takes whole and writes; what
// does not fit is dropped and counted.
class AccessLog {
 public:
  // `destination`: "-" for standard output, else a file appended to.
  static absl::StatusOr<std::unique_ptr<AccessLog>> Open(const std::string& destination,
                                                         AccessLogObserver& observer);
  // Writes what is queued (waiting at most a second for a blocked sink), then stops.
  ~AccessLog();

  // Queues `entry`'s line unless sampling or the caps in `settings` leave it out.
  void Submit(const egress::v1::AccessLogEntry& entry, const AccessLogSettings& settings);

  // `url` as the log shows it: a password or other userinfo as "REDACTED", and the query
  // string too unless `keep_query` (both often carry credentials); no fragment; at most
  // kMaxLoggedBytes and "..." (valid URLs too). What does not parse as a URL, or parses
  // as something else than it reads ("http://u:p#w@h/"), loses its query and fragment,
  // what comes before its last '@' after the scheme, and what follows that '@' when a
  // query or fragment begins before it. The one rule for every URL the log shows.
  static std::string LoggedUrl(const std::string& url, bool keep_query);
  // An error's message as the log shows it: the URL it quotes (a caller's, or an
  // upstream's Location; transport::UrlError made it and carries it) quoted as LoggedUrl
  // shows it, and at most kMaxLoggedBytes. No message quotes a URL any other way.
  static std::string LoggedMessage(const absl::Status& error, bool keep_query);
  // Any other text of a caller's (a method not yet checked) as the log shows it: at most
  // kMaxLoggedBytes and "...".
  static std::string LoggedText(std::string text);
  // The most of a caller's text (a URL that is not one, an error message quoting it) a
  // line holds: the queue is bounded in lines, so each line must be bounded too.
  static constexpr size_t kMaxLoggedBytes = 4096;

 private:
  AccessLog(int fd, bool owned, AccessLogObserver& observer);
  void Run();
  // Writes all of `text`; false when the sink failed, or stayed blocked for a second
  // after egressd began to stop.
  bool WriteAll(const std::string& text);
  // Whether a successful fetch is one of the sampled ones.
  bool Sampled(double ratio);
  // Whether the rate cap lets one more line through now (under mu_).
  bool TakeToken(uint32_t per_second);

  const int fd_;
  const bool owned_;
  const bool blocking_;  // writes to fd_ may block (see WriteAll)
  AccessLogObserver& observer_;
  std::mutex mu_;
  std::condition_variable wake_;
  // Lines waiting for the writer, one after another, and how many (guarded by mu_).
  std::string queued_;
  size_t queued_lines_ = 0;
  bool stopping_ = false;  // guarded by mu_
  // The writer waits for a first entry (guarded by mu_): only then does Submit wake it.
  bool writer_idle_ = false;
  std::atomic<bool> stop_writing_{false};  // WriteAll's copy of stopping_
  absl::Time give_up_;  // when writing stops once stopping (set before stop_writing_)
  transport::TokenBucket rate_cap_;                // guarded by mu_
  std::thread writer_;
};

}  // namespace egress

#endif  // EGRESS_SERVICE_ACCESS_LOG_ACCESS_LOG_H_
