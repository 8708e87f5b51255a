#ifndef EGRESS_SERVICE_TRANSPORT_IO_READ_SIZE_H_
#define EGRESS_SERVICE_TRANSPORT_IO_READ_SIZE_H_

#include <algorithm>
#include <cstddef>

namespace egress::transport {

// The size of a stream's next socket read: 4 KiB at first, twice as much after each read
// that filled what it asked for, up to 64 KiB; back to 4 KiB between exchanges. Small
// first reads keep a burst of small responses from allocating much at once; growing ones
// take a large body in few reads (Beast's read_size grows only with its buffer: 1 MiB
// came as ~1 KiB reads).
class GrowingReadSize {
 public:
  static constexpr size_t kFirst = 4 * 1024;
  static constexpr size_t kMax = 64 * 1024;

  size_t next() const { return next_; }
  // After a read that asked for `asked` bytes and got `got`.
  void Read(size_t asked, size_t got) {
    if (got == asked) next_ = std::min(2 * next_, kMax);
  }
  void Reset() { next_ = kFirst; }

 private:
  size_t next_ = kFirst;
};

}  // namespace egress::transport

#endif  // EGRESS_SERVICE_TRANSPORT_IO_READ_SIZE_H_
