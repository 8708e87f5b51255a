#include "service/fetch/stalled_write.h"

#include "absl/strings/str_cat.h"

namespace egress::fetch {

absl::Status StalledWrite() {
  return absl::DeadlineExceededError(absl::StrCat(
      "deadline expired with a message of the stream still to be written to the caller ",
      absl::FormatDuration(kStalledWriteGrace), " past it; the stream was cancelled and the "
      "upstream connection let go"));
}

}  // namespace egress::fetch
