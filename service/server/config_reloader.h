#ifndef EGRESS_SERVICE_SERVER_CONFIG_RELOADER_H_
#define EGRESS_SERVICE_SERVER_CONFIG_RELOADER_H_

#include <cstddef>
#include <mutex>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "service/base/poller.h"
#include "service/server/server.h"

namespace egress {

// Applies the --config file again when its contents change (checked every `period`: a
// Kubernetes ConfigMap update swaps a symlink, which a watch on the file would miss) and
// whenever Reload() is called (SIGHUP). A file that does not load is logged and
// rejected; the config in force stays, and the file is tried again on the next poll (a
// CA file it names may not be mounted yet). A file is applied only once it has settled:
// two reads a moment apart, with the same size and mtime, agree. An empty file is never
// applied.
//
// Precedence: the most recent change wins, whole. UpdateConfig replaces the config in
// force; a later change of the file's contents (or SIGHUP) replaces it again with the
// file. An unchanged file is not applied again, so UpdateConfig's changes stay until the
// file changes or SIGHUP.
class ConfigReloader {
 public:
  // `applied_contents` is what the file held when egressd started with it.
  ConfigReloader(EgressServer& server, std::string path, std::string applied_contents,
                 absl::Duration period);
  ~ConfigReloader();

  // Reads and applies the file now.
  absl::Status Reload();

 private:
  void Poll();
  absl::Status Apply(const std::string& contents);
  // The file's contents once two reads `settle_` apart agree; UNAVAILABLE while it is
  // being written, or an error when it cannot be read or is empty.
  absl::StatusOr<std::string> ReadSettled() const;
  // Logs a problem with the file once, not on every poll while it lasts.
  void LogProblem(const std::string& message);

  EgressServer& server_;
  const std::string path_;
  const absl::Duration settle_;
  std::mutex mu_;
  std::string applied_contents_ ABSL_GUARDED_BY(mu_);  // last contents applied
  std::string last_problem_ ABSL_GUARDED_BY(mu_);      // last rejection logged
  Poller watcher_;  // last: it starts once the rest is set, and stops first
};

// The most a --config file may hold: a config of a few hundred origins is a few hundred
// KiB; a file past this is a mistake (or /dev/zero), refused before it is parsed.
inline constexpr size_t kMaxConfigFileBytes = 4 << 20;

// The --config file's contents, read with the bounded reader (service/base/files.h): an
// error (naming the file) when it is no regular file (a directory, a FIFO, a device),
// cannot be read, is over kMaxConfigFileBytes, or is empty or only whitespace, so that
// egressd never runs on built-in defaults by mistake.
absl::StatusOr<std::string> ReadConfigFile(const std::string& path);

}  // namespace egress

#endif  // EGRESS_SERVICE_SERVER_CONFIG_RELOADER_H_
