#ifndef EGRESS_SERVICE_CONFIG_RELOADER_H_
#define EGRESS_SERVICE_CONFIG_RELOADER_H_

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "service/server.h"

namespace egress {

// Applies the --config file again when its contents change (checked every `period`: a
// Kubernetes ConfigMap update swaps a symlink, which a watch on the file would miss) and
// whenever Reload() is called (SIGHUP). A file that does not load is logged and
// rejected; the config in force stays.
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
  void Watch();
  absl::Status Apply(const std::string& contents);

  EgressServer& server_;
  const std::string path_;
  const absl::Duration period_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::string seen_contents_ ABSL_GUARDED_BY(mu_);  // last contents applied or rejected
  std::thread watcher_;
};

// The whole of a file, or NOT_FOUND.
absl::StatusOr<std::string> ReadWholeFile(const std::string& path);

}  // namespace egress

#endif  // EGRESS_SERVICE_CONFIG_RELOADER_H_
