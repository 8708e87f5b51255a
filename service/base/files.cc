#include "service/base/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace egress {
namespace {

absl::Status CannotRead(const std::string& path, int error) {
  return absl::NotFoundError(absl::StrCat("cannot read \"", path, "\": ", std::strerror(error)));
}

// OK for a regular file; otherwise what the file is instead, named.
absl::Status RegularFile(const std::string& path, mode_t mode) {
  if (S_ISREG(mode)) return absl::OkStatus();
  if (S_ISDIR(mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", path, "\" is a directory, not a file (name the file inside it)"));
  }
  const char* what = S_ISFIFO(mode)   ? "a FIFO"
                     : S_ISCHR(mode)  ? "a character device"
                     : S_ISBLK(mode)  ? "a block device"
                     : S_ISSOCK(mode) ? "a socket"
                                      : "of an unknown kind";
  return absl::InvalidArgumentError(
      absl::StrCat("\"", path, "\" is ", what, ", not a regular file"));
}

absl::Status TooLarge(const std::string& path, size_t max_bytes) {
  return absl::InvalidArgumentError(absl::StrCat(
      "\"", path, "\" is larger than ", max_bytes, " bytes, the most egressd reads of it"));
}

// Closes a descriptor when it goes out of scope.
class Descriptor {
 public:
  explicit Descriptor(int fd) : fd_(fd) {}
  ~Descriptor() {
    if (fd_ >= 0) close(fd_);
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  int get() const { return fd_; }

 private:
  const int fd_;
};

}  // namespace

absl::StatusOr<FileVersion> StatFileVersion(const std::string& path) {
  struct stat info;
  if (stat(path.c_str(), &info) != 0) return CannotRead(path, errno);
  return FileVersion{info.st_dev, info.st_ino, info.st_size, info.st_mtim};
}

absl::StatusOr<std::string> ReadBoundedFile(const std::string& path, size_t max_bytes) {
  // Looked at before opening too, so that a device is refused without being opened
  // (opening some has effects); the check that counts is fstat's, below.
  struct stat info;
  if (stat(path.c_str(), &info) != 0) return CannotRead(path, errno);
  if (absl::Status kind = RegularFile(path, info.st_mode); !kind.ok()) return kind;

  Descriptor file(open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
  if (file.get() < 0) return CannotRead(path, errno);
  if (fstat(file.get(), &info) != 0) return CannotRead(path, errno);
  if (absl::Status kind = RegularFile(path, info.st_mode); !kind.ok()) return kind;
  if (info.st_size > 0 && static_cast<size_t>(info.st_size) > max_bytes) {
    return TooLarge(path, max_bytes);
  }

  // The size is a hint only: /proc files say 0, and a file may grow while it is read.
  std::string contents;
  contents.resize(std::min(max_bytes, static_cast<size_t>(std::max<off_t>(info.st_size, 0))) + 1);
  size_t length = 0;
  while (true) {
    if (length == contents.size()) {
      if (length > max_bytes) return TooLarge(path, max_bytes);
      contents.resize(std::min(max_bytes + 1, std::max<size_t>(2 * length, 4096)));
    }
    const ssize_t got = read(file.get(), &contents[length], contents.size() - length);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      return absl::DataLossError(
          absl::StrCat("error reading \"", path, "\": ", std::strerror(errno)));
    }
    if (got == 0) break;
    length += static_cast<size_t>(got);
  }
  if (length > max_bytes) return TooLarge(path, max_bytes);
  contents.resize(length);
  return contents;
}

}  // namespace egress
