#ifndef EGRESS_SERVICE_BASE_LOG_TEXT_H_
#define EGRESS_SERVICE_BASE_LOG_TEXT_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace egress {

// How much of a file's or a caller's text one log line or error message quotes.
inline constexpr size_t kMaxQuotedBytes = 200;

// `text` fit to be quoted in one log line: its first `max_bytes` bytes, C-escaped
// (absl::CHexEscape: no NUL, control byte, raw newline, quote or non-ASCII byte gets
// through as itself), then "..." when there was more.
std::string QuoteForLog(absl::string_view text, size_t max_bytes = kMaxQuotedBytes);

// The longest log line or message egressd writes about a file or a config it rejects.
inline constexpr size_t kMaxLogLineBytes = 2048;

// `text` as one line of a log: control bytes (NUL, ESC, CR, LF, ...) written as \xNN so
// that nothing in it starts a line of its own or drives a terminal, cut after `max_bytes`
// bytes with "...". Printable text, quotes included, stays as it is.
std::string OneLogLine(absl::string_view text, size_t max_bytes = kMaxLogLineBytes);

}  // namespace egress

#endif  // EGRESS_SERVICE_BASE_LOG_TEXT_H_
