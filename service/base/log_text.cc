#include "service/base/log_text.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace egress {

std::string QuoteForLog(absl::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return absl::CHexEscape(text);
  return absl::CHexEscape(text.substr(0, max_bytes)) + "...";
}

std::string OneLogLine(absl::string_view text, size_t max_bytes) {
  const bool cut = text.size() > max_bytes;
  std::string line;
  for (const char c : cut ? text.substr(0, max_bytes) : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) {
      absl::StrAppend(&line, "\\x", absl::Hex(byte, absl::kZeroPad2));
    } else {
      line += c;
    }
  }
  if (cut) line += "...";
  return line;
}

}  // namespace egress
