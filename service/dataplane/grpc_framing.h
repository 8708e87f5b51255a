#ifndef EGRESS_SERVICE_DATAPLANE_GRPC_FRAMING_H_
#define EGRESS_SERVICE_DATAPLANE_GRPC_FRAMING_H_

// gRPC over HTTP/2 as the wire carries it (PROTOCOL-HTTP2.md in gRPC's docs): the 5-byte
// length prefix of each message, the grpc-timeout header, and the trailers that end a
// call (grpc-status, a percent-encoded grpc-message, grpc-status-details-bin). No I/O.

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "grpcpp/support/status.h"

namespace egress::dataplane {

// What comes before each message on the wire: uncompressed flag, 4-byte big-endian length.
constexpr uint64_t kMessagePrefixBytes = 5;
std::array<char, kMessagePrefixBytes> MessagePrefix(uint32_t message_bytes);
// The bytes of one message on the wire: its prefix, then the serialized message.
std::string FrameMessage(absl::string_view message);

// One message on its way to the wire, taken in pieces as flow control lets them go: its
// prefix, then its bytes, which are moved in rather than copied in behind the prefix.
class OutgoingMessage {
 public:
  OutgoingMessage() = default;  // none: done at once
  explicit OutgoingMessage(std::string message);

  // Copies at most `length` of the bytes not yet taken to `out`; returns how many.
  size_t Take(uint8_t* out, size_t length);
  // Every byte is taken (or there were none).
  bool done() const { return taken_ == size_; }

 private:
  std::array<char, kMessagePrefixBytes> prefix_{};
  std::string message_;
  size_t size_ = 0;   // of the prefix and the message
  size_t taken_ = 0;  // of them
};

// The largest request message accepted, named in the refusal of a larger one: the
// configuration field that sets it (ErrorInfo's "limit"; "" for none) and why.
struct MessageBound {
  uint64_t bytes;
  absl::string_view field = "limits.max_request_body_bytes";
  absl::string_view reason = "from limits.max_request_body_bytes and "
                             "limits.max_request_header_bytes";
};

// The length a request message's prefix declares: RESOURCE_EXHAUSTED over `bound`,
// UNIMPLEMENTED when the message is compressed (egressd offers no grpc-encoding).
absl::StatusOr<uint32_t> MessageLength(absl::string_view prefix, const MessageBound& bound);

// Collects one request message from a stream's DATA bytes, refusing one larger than
// `max_bytes` as soon as its prefix says so (before its bytes arrive), a compressed one,
// and a second message on a unary call.
class MessageReader {
 public:
  explicit MessageReader(uint64_t max_bytes) : bound_{max_bytes} {}

  // RESOURCE_EXHAUSTED over max_bytes, UNIMPLEMENTED when compressed, INVALID_ARGUMENT
  // for bytes after the message; nothing more should be appended after an error.
  absl::Status Append(absl::string_view bytes);
  // The message is whole: Take may be called.
  bool complete() const;
  // The bytes the message takes on the wire (its prefix and itself), once its prefix is in;
  // 0 before.
  uint64_t expected_bytes() const;
  // INVALID_ARGUMENT unless one whole message came (the request ended early).
  absl::StatusOr<std::string> Take();
  // Makes room for the whole message once its prefix is in: one allocation of its size,
  // not the doublings of appending (up to twice its size). Only for a message the
  // caller's connection has room for: the prefix alone costs a caller nothing.
  void ReserveWhole();

 private:
  MessageBound bound_;
  std::string bytes_;  // the prefix, then the message
};

// The caller's deadline in a grpc-timeout value: at most 8 ASCII digits and a unit, H M
// S m u n (hours to nanoseconds). INVALID_ARGUMENT for anything else.
absl::StatusOr<absl::Duration> ParseGrpcTimeout(absl::string_view value);

// grpc-message's encoding: bytes outside printable ASCII, and '%', as %XX.
std::string PercentEncode(absl::string_view text);

// The header fields that end a call with `status` (the trailers, or the whole answer of
// a Trailers-Only response): grpc-status, grpc-message when there is one, and
// grpc-status-details-bin (base64) when the status carries details.
std::vector<std::pair<std::string, std::string>> StatusFields(const grpc::Status& status);

}  // namespace egress::dataplane

#endif  // EGRESS_SERVICE_DATAPLANE_GRPC_FRAMING_H_
