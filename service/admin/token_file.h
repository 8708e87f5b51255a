#ifndef EGRESS_SERVICE_ADMIN_TOKEN_FILE_H_
#define EGRESS_SERVICE_ADMIN_TOKEN_FILE_H_

#include <cstddef>
#include <mutex>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "service/base/files.h"
#include "service/base/poller.h"

namespace egress {

// The most an --admin_token_file may hold: a token is tens of bytes, a JWT a few KiB.
inline constexpr size_t kMaxTokenFileBytes = 64 << 10;

// A bearer token kept in a file, read again when the file's size, mtime or inode change
// (a Kubernetes Secret update swaps a symlink), so a rotated token needs no restart.
//
// The file is read only on a watcher thread of its own: every `period`, and soon after
// CheckSoon() (a call brought a token that does not match: it may have been rotated).
// Current() answers from memory, so the gRPC thread that authorizes a call never touches
// the file (a token file swapped for a FIFO or a slow mount cannot hold a call). A rotated
// file's old token is accepted until the watcher has seen the change.
class TokenFile {
 public:
  // Reads the file once now, on the caller's thread (at start), then watches it.
  explicit TokenFile(std::string path, absl::Duration period = absl::Seconds(1));
  ~TokenFile();
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;

  // The token in the file at `path` now, whitespace stripped, read with the bounded
  // reader (kMaxTokenFileBytes); UNAVAILABLE, naming the file and why, when it is no
  // regular file, cannot be read, is too large or is empty.
  static absl::StatusOr<std::string> Read(const std::string& path);

  // The token last read; the error when the last read failed (then no token is
  // accepted: the check fails closed). No I/O.
  absl::StatusOr<std::string> Current() const;

  // Asks the watcher to look at the file now; does not wait for it.
  void CheckSoon() { watcher_.Wake(); }

 private:
  // Reads the file again when its version changed (the watcher's thread only).
  void Refresh();

  const std::string path_;
  FileVersion version_;  // of the file last read; the watcher's thread only
  mutable std::mutex mu_;
  absl::StatusOr<std::string> token_ ABSL_GUARDED_BY(mu_);
  Poller watcher_;  // last: it starts once the rest is set, and stops first
};

}  // namespace egress

#endif  // EGRESS_SERVICE_ADMIN_TOKEN_FILE_H_
