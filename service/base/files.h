#ifndef EGRESS_SERVICE_BASE_FILES_H_
#define EGRESS_SERVICE_BASE_FILES_H_

#include <sys/types.h>

#include <cstddef>
#include <ctime>
#include <string>

#include "absl/status/statusor.h"

namespace egress {

// What tells one version of a file from another, besides its contents.
struct FileVersion {
  dev_t device = 0;
  ino_t inode = 0;
  off_t size = -1;
  timespec mtime{};
  bool operator==(const FileVersion& other) const {
    return device == other.device && inode == other.inode && size == other.size &&
           mtime.tv_sec == other.mtime.tv_sec && mtime.tv_nsec == other.mtime.tv_nsec;
  }
  bool operator!=(const FileVersion& other) const { return !(*this == other); }
};

// The version of whatever `path` names now (symlinks followed; nothing is opened).
// NOT_FOUND when it cannot be looked up.
absl::StatusOr<FileVersion> StatFileVersion(const std::string& path);

// The whole of `path`, a regular file of at most `max_bytes` bytes: the one way egressd
// reads a file. Every caller names its bound (config 4 MiB, admin token 64 KiB, PEM
// certificates, keys and CA bundles 1 MiB, /proc files 1 MiB).
//
// The file is opened with O_NONBLOCK (a FIFO with no writer, a device or a socket never
// holds the caller), checked on the opened descriptor (fstat: nothing can be swapped in
// between a check and the open), and at most max_bytes + 1 bytes are read, so a file
// that grows or never ends (/dev/zero) costs no more than its bound. Errors name the path:
//   NOT_FOUND         "cannot read "<path>": <errno text>" (missing, no permission)
//   INVALID_ARGUMENT  "<path>" is a directory / a FIFO / a character device / a block
//                     device / a socket, not a regular file; or is larger than N bytes
//   DATA_LOSS         a read failed part way
absl::StatusOr<std::string> ReadBoundedFile(const std::string& path, size_t max_bytes);

}  // namespace egress

#endif  // EGRESS_SERVICE_BASE_FILES_H_
