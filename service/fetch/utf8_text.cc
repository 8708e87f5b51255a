#include "service/fetch/utf8_text.h"

#include "absl/strings/str_format.h"
#include "google/protobuf/stubs/common.h"

namespace egress {

bool IsUtf8(absl::string_view text) {
  return google::protobuf::internal::IsStructurallyValidUTF8(text.data(),
                                                             static_cast<int>(text.size()));
}

std::string Latin1ToUtf8(absl::string_view bytes) {
  std::string text;
  text.reserve(bytes.size() * 2);
  for (const char c : bytes) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x80) {
      text.push_back(c);
    } else {
      text.push_back(static_cast<char>(0xC0 | (byte >> 6)));
      text.push_back(static_cast<char>(0x80 | (byte & 0x3F)));
    }
  }
  return text;
}

std::string EscapeNonUtf8(absl::string_view text) {
  std::string out;
  while (!text.empty()) {
    const auto valid = static_cast<size_t>(google::protobuf::internal::UTF8SpnStructurallyValid(
        google::protobuf::StringPiece(text.data(), text.size())));
    out.append(text.data(), valid);
    if (valid == text.size()) break;
    absl::StrAppendFormat(&out, "\\x%02X", static_cast<unsigned char>(text[valid]));
    text.remove_prefix(valid + 1);
  }
  return out;
}

}  // namespace egress
