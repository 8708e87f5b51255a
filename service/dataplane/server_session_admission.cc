// ServerSession's admission of request messages still arriving (SessionLimits::
// max_buffered_messages): HTTP/2 flow control holds a message back until it fits.

#include <algorithm>
#include <utility>

#include "service/dataplane/server_session.h"

namespace egress::dataplane {

void ServerSession::Consume(int32_t stream_id, Stream& stream, size_t size) {
  if (stream.reader.complete()) return;  // no more bytes to take
  stream.unconsumed += size;
  if (stream.admitted > 0) {
    nghttp2_session_consume_stream(session_, stream_id, std::exchange(stream.unconsumed, 0));
    return;
  }
  // Its size is known once its prefix is in (within its first window): it waits its turn.
  if (stream.waiting || stream.reader.expected_bytes() == 0) return;
  stream.waiting = true;
  waiting_.push_back(stream_id);
  Admit();
}

// Called where nghttp2's output is flushed next (after its callbacks, or by Answer): the
// window updates go out with it.
void ServerSession::Admit() {
  const uint64_t limit = limits_.max_buffered_messages * limits_.max_message_bytes;
  while (!waiting_.empty()) {
    const int32_t stream_id = waiting_.front();
    Stream* stream = Find(stream_id);
    if (!stream) {  // gone with its connection (End)
      waiting_.pop_front();
      continue;
    }
    const uint64_t size = stream->reader.expected_bytes();
    if (admitted_bytes_ > 0 && admitted_bytes_ + size > limit) return;
    waiting_.pop_front();
    stream->waiting = false;
    stream->admitted = size;
    admitted_bytes_ += size;
    stream->reader.ReserveWhole();
    nghttp2_session_consume_stream(session_, stream_id, std::exchange(stream->unconsumed, 0));
  }
}

void ServerSession::Unbuffer(Stream& stream) {
  admitted_bytes_ -= std::exchange(stream.admitted, 0);
  if (std::exchange(stream.waiting, false)) {
    // Out of the queue now, not when it reaches the front: a caller opening and ending
    // streams behind one that waits long would grow it without bound.
    const auto at = std::find(waiting_.begin(), waiting_.end(), stream.call.stream_id);
    if (at != waiting_.end()) waiting_.erase(at);
  }
  stream.unconsumed = 0;
  stream.reader = MessageReader(limits_.max_message_bytes);  // frees its bytes
  std::string().swap(stream.unread);
  Admit();
}

}  // namespace egress::dataplane
