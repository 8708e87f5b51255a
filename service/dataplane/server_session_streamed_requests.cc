// ServerSession's streamed requests (Methods::StreamsRequests): the DATA bytes of such a
// call kept as they came, each message's prefix checked on arrival, and each message
// handed to the method's Read, its flow-control window given back only then.

#include <optional>
#include <string>
#include <utility>

#include "boost/asio/post.hpp"
#include "service/dataplane/server_session.h"

namespace egress::dataplane {

// The bytes stay as they came, one buffer: a flood of empty messages costs their wire
// bytes, which the stream's window bounds, not a string each.
void ServerSession::Receive(int32_t stream_id, Stream& stream, absl::string_view bytes) {
  stream.unread.append(bytes.data(), bytes.size());
  while (stream.unread.size() >= stream.next_message_at + kMessagePrefixBytes) {
    const auto length = MessageLength(
        absl::string_view(stream.unread).substr(stream.next_message_at, kMessagePrefixBytes),
        kStreamedMessageBound);
    if (!length.ok()) {
      observer_.OnCallRefused(CallRefusal::kBadRequestMessage);
      return Refuse(stream_id, stream, length.status());
    }
    stream.next_message_at += kMessagePrefixBytes + *length;
  }
  Deliver(stream_id, stream);
}

void ServerSession::Read(int32_t stream_id, OnMessage on_message) {
  Stream* stream = Find(stream_id);
  if (!stream || stream->answered || ended_) return;
  stream->on_message = std::move(on_message);
  Deliver(stream_id, *stream);
  Flush();  // the window the message gave back
}

void ServerSession::Deliver(int32_t stream_id, Stream& stream) {
  if (!stream.on_message || stream.answered) return;
  std::optional<std::string> message;
  const absl::string_view unread = stream.unread;
  if (unread.size() >= kMessagePrefixBytes) {
    // Checked as it came (Receive).
    const uint64_t size = kMessagePrefixBytes +
                          *MessageLength(unread.substr(0, kMessagePrefixBytes), kStreamedMessageBound);
    if (unread.size() < size) return;  // the rest of it is on its way
    message.emplace(unread.substr(kMessagePrefixBytes, size - kMessagePrefixBytes));
    stream.unread.erase(0, size);
    stream.next_message_at -= size;
    nghttp2_session_consume_stream(session_, stream_id, size);
  } else if (!stream.requests_ended) {
    return;
  }
  boost::asio::post(executor(), [on_message = std::exchange(stream.on_message, nullptr),
                         message = std::move(message)]() mutable {
    on_message(std::move(message));
  });
}

}  // namespace egress::dataplane
