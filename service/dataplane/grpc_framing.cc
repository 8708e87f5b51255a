#include "service/dataplane/grpc_framing.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "service/base/error_reason.h"

namespace egress::dataplane {
namespace {

uint32_t DeclaredLength(absl::string_view prefix) {
  uint32_t length = 0;
  for (size_t i = 1; i < kMessagePrefixBytes; ++i) {
    length = (length << 8) | static_cast<uint8_t>(prefix[i]);
  }
  return length;
}

}  // namespace

std::array<char, kMessagePrefixBytes> MessagePrefix(uint32_t message_bytes) {
  std::array<char, kMessagePrefixBytes> prefix{};  // [0]: not compressed
  for (size_t i = 1; i < kMessagePrefixBytes; ++i) {
    prefix[i] = static_cast<char>(message_bytes >> (8 * (kMessagePrefixBytes - 1 - i)));
  }
  return prefix;
}

std::string FrameMessage(absl::string_view message) {
  const auto prefix = MessagePrefix(static_cast<uint32_t>(message.size()));
  return absl::StrCat(absl::string_view(prefix.data(), prefix.size()), message);
}

OutgoingMessage::OutgoingMessage(std::string message)
    : prefix_(MessagePrefix(static_cast<uint32_t>(message.size()))),
      message_(std::move(message)),
      size_(kMessagePrefixBytes + message_.size()) {}

size_t OutgoingMessage::Take(uint8_t* out, size_t length) {
  size_t taken = 0;
  while (taken < length && !done()) {
    const absl::string_view from =
        taken_ < kMessagePrefixBytes
            ? absl::string_view(prefix_.data() + taken_, kMessagePrefixBytes - taken_)
            : absl::string_view(message_).substr(taken_ - kMessagePrefixBytes);
    const size_t piece = std::min(length - taken, from.size());
    std::memcpy(out + taken, from.data(), piece);
    taken += piece;
    taken_ += piece;
  }
  return taken;
}

absl::Status MessageReader::Append(absl::string_view bytes) {
  if (bytes.empty()) return absl::OkStatus();
  const auto more_messages = [] {
    return transport::WithReason(
        absl::InvalidArgumentError("more than one request message on a unary call"),
        "UNARY_CALL_WITH_MORE_MESSAGES");
  };
  if (complete()) return more_messages();
  const bool prefix_known = bytes_.size() >= kMessagePrefixBytes;
  bytes_.append(bytes.data(), bytes.size());
  if (bytes_.size() < kMessagePrefixBytes) return absl::OkStatus();
  if (!prefix_known) {
    if (auto length = MessageLength(bytes_, bound_); !length.ok()) return length.status();
  }
  if (bytes_.size() > expected_bytes()) return more_messages();
  return absl::OkStatus();
}

absl::StatusOr<uint32_t> MessageLength(absl::string_view prefix, const MessageBound& bound) {
  const uint32_t length = DeclaredLength(prefix);
  if (prefix[0] != 0) {
    return transport::WithReason(
        absl::UnimplementedError(
            "the request message is compressed; egressd's data plane accepts only "
            "uncompressed messages (grpc-encoding identity)"),
        "COMPRESSION_UNSUPPORTED");
  }
  if (length > bound.bytes) {
    return transport::WithReason(
        absl::ResourceExhaustedError(absl::StrCat("the request message of ", length,
                                                  " bytes is larger than egressd accepts (",
                                                  bound.bytes, " bytes, ", bound.reason, ")")),
        "REQUEST_MESSAGE_TOO_LARGE", {{"limit", bound.field}});
  }
  return length;
}

bool MessageReader::complete() const {
  return bytes_.size() >= kMessagePrefixBytes && bytes_.size() == expected_bytes();
}

uint64_t MessageReader::expected_bytes() const {
  return bytes_.size() < kMessagePrefixBytes ? 0 : kMessagePrefixBytes + uint64_t{DeclaredLength(bytes_)};
}

absl::StatusOr<std::string> MessageReader::Take() {
  if (!complete()) {
    return transport::WithReason(
        absl::InvalidArgumentError(absl::StrCat(
            "the request ended after ", bytes_.size(),
            " bytes, without one whole length-prefixed message")),
        "REQUEST_MESSAGE_INCOMPLETE");
  }
  bytes_.erase(0, kMessagePrefixBytes);  // in place: a large message is not copied
  return std::move(bytes_);
}

void MessageReader::ReserveWhole() {
  if (const uint64_t expected = expected_bytes(); expected > bytes_.size()) {
    bytes_.reserve(expected);
  }
}

absl::StatusOr<absl::Duration> ParseGrpcTimeout(absl::string_view value) {
  const auto invalid = [&] {
    return transport::WithReason(
        absl::InvalidArgumentError(absl::StrCat(
            "grpc-timeout \"", absl::CHexEscape(value.substr(0, 32)),
            "\" is not 1 to 8 digits followed by a unit of H, M, S, m, u or n")),
        "INVALID_GRPC_TIMEOUT");
  };
  if (value.size() < 2 || value.size() > 9) return invalid();
  const absl::string_view digits = value.substr(0, value.size() - 1);
  int64_t amount = 0;
  for (char c : digits) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return invalid();
    amount = amount * 10 + (c - '0');
  }
  switch (value.back()) {
    case 'H': return absl::Hours(amount);
    case 'M': return absl::Minutes(amount);
    case 'S': return absl::Seconds(amount);
    case 'm': return absl::Milliseconds(amount);
    case 'u': return absl::Microseconds(amount);
    case 'n': return absl::Nanoseconds(amount);
    default: return invalid();
  }
}

std::string PercentEncode(absl::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string encoded;
  encoded.reserve(text.size());
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte <= 0x7e && byte != '%') {
      encoded.push_back(c);
    } else {
      encoded.push_back('%');
      encoded.push_back(kHex[byte >> 4]);
      encoded.push_back(kHex[byte & 0xf]);
    }
  }
  return encoded;
}

std::vector<std::pair<std::string, std::string>> StatusFields(const grpc::Status& status) {
  std::vector<std::pair<std::string, std::string>> fields;
  fields.emplace_back("grpc-status", absl::StrCat(static_cast<int>(status.error_code())));
  if (!status.error_message().empty()) {
    fields.emplace_back("grpc-message", PercentEncode(status.error_message()));
  }
  if (!status.error_details().empty()) {
    fields.emplace_back("grpc-status-details-bin", absl::Base64Escape(status.error_details()));
  }
  return fields;
}

}  // namespace egress::dataplane
