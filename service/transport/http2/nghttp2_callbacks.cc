#include "service/transport/http2/nghttp2_callbacks.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <string>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "boost/asio/buffer.hpp"
#include "service/base/error_reason.h"
#include "service/transport/http2/errors.h"
#include "service/transport/http2/session_limits.h"

namespace egress::transport::http2 {

namespace net = boost::asio;

void Session::Callbacks::Install(nghttp2_session_callbacks* callbacks) {
  nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks, &OnBeginHeaders);
  nghttp2_session_callbacks_set_on_header_callback(callbacks, &OnHeader);
  nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, &OnFrameReceived);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, &OnDataChunk);
  nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, &OnStreamClose);
  nghttp2_session_callbacks_set_on_frame_send_callback(callbacks, &OnFrameSent);
  nghttp2_session_callbacks_set_on_frame_not_send_callback(callbacks, &OnFrameNotSent);
  nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(callbacks, &OnInvalidFrame);
  nghttp2_session_callbacks_set_error_callback2(callbacks, &OnError);
}

template <class F>
int Session::Callbacks::Protected(
    void* user_data, F&& body) {
  auto* session = static_cast<Session*>(user_data);
  try {
    return body(*session);
  } catch (const std::exception& e) {
    session->observer_.OnTransportException();
    session->ending_ = absl::InternalError(absl::StrCat(
        "internal error in egress while talking HTTP/2 to ", session->origin_key_, " (",
        e.what(), "); the connection was closed"));
    return NGHTTP2_ERR_CALLBACK_FAILURE;
  }
}

int Session::Callbacks::OnBeginHeaders(
    nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
  return Protected(user_data, [&](Session& session) {
    if (Stream* stream = session.Find(frame->hd.stream_id)) {
      stream->header_list_bytes_ = 0;
      stream->head_in_progress_ = ResponseHead{};
    }
    return 0;
  });
}

int Session::Callbacks::OnHeader(
    nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name_data, size_t name_length,
    const uint8_t* value_data, size_t value_length, uint8_t /*flags*/, void* user_data) {
  return Protected(user_data, [&](Session& session) {
    Stream* stream = session.Find(frame->hd.stream_id);
    if (!stream || stream->state_ == Stream::State::kFailed) return 0;
    const absl::string_view name(reinterpret_cast<const char*>(name_data), name_length);
    const absl::string_view value(reinterpret_cast<const char*>(value_data), value_length);
    stream->header_list_bytes_ += name.size() + value.size() + 32;  // RFC 9113 6.5.2
    if (stream->header_list_bytes_ > session.limits_.max_header_list_bytes) {
      const bool head = stream->state_ == Stream::State::kAwaitingHead;
      session.observer_.OnUpstreamLimit(
          session.origin_, head ? UpstreamLimit::kResponseHead : UpstreamLimit::kTrailers);
      stream->Fail(LimitExceeded(session.origin_key_,
                                 absl::StrCat(head ? "response headers" : "trailers",
                                              " over the limit of ",
                                              session.limits_.max_header_list_bytes,
                                              " bytes (transport.max_response_header_bytes)")));
      // nghttp2 resets the stream and decodes the rest of the block for nobody.
      return static_cast<int>(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE);
    }
    if (stream->state_ != Stream::State::kAwaitingHead) return 0;  // trailers: not kept
    ResponseHead& head = stream->head_in_progress_;
    if (name == ":status") {
      // nghttp2 has checked it is three digits.
      if (!absl::SimpleAtoi(value, &head.status_code)) head.status_code = 0;
    } else if (!name.empty() && name[0] != ':') {
      head.headers.emplace_back(std::string(name), std::string(value));
    }
    return 0;
  });
}

int Session::Callbacks::OnFrameReceived(
    nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
  return Protected(user_data, [&](Session& session) {
    const bool end_stream = frame->hd.flags & NGHTTP2_FLAG_END_STREAM;
    switch (frame->hd.type) {
      case NGHTTP2_HEADERS:
        if (Stream* stream = session.Find(frame->hd.stream_id)) {
          stream->OnHeadersReceived(end_stream);
        }
        break;
      case NGHTTP2_DATA:
        if (Stream* stream = session.Find(frame->hd.stream_id); stream && end_stream) {
          stream->EndBody();
        }
        break;
      case NGHTTP2_SETTINGS:
        if (!(frame->hd.flags & NGHTTP2_FLAG_ACK)) {
          session.server_max_streams_ = nghttp2_session_get_remote_settings(
              session.session_.get(), NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
        }
        break;
      case NGHTTP2_PING:
        if (frame->hd.flags & NGHTTP2_FLAG_ACK) {
          uint64_t opaque = 0;
          std::memcpy(&opaque, frame->ping.opaque_data, sizeof(opaque));
          if (auto ping = session.pings_.find(opaque); ping != session.pings_.end()) {
            ping->second.timer->cancel();
            session.deferred_.push_back(
                [done = std::move(ping->second.done)] { done(absl::OkStatus()); });
            session.pings_.erase(ping);
          }
        }
        break;
      case NGHTTP2_GOAWAY:
        session.OnGoaway(frame->goaway.last_stream_id, frame->goaway.error_code,
                         absl::string_view(reinterpret_cast<const char*>(frame->goaway.opaque_data),
                                           frame->goaway.opaque_data_len));
        break;
      default:
        break;
    }
    return 0;
  });
}

int Session::Callbacks::OnDataChunk(
    nghttp2_session*, uint8_t /*flags*/, int32_t stream_id, const uint8_t* data, size_t length,
    void* user_data) {
  return Protected(user_data, [&](Session& session) {
    // The connection's window reopens as bytes arrive (Settle): callers that stop
    // reading hold their own streams' windows, not the one all streams share.
    session.received_bytes_ += length;
    Stream* stream = session.Find(stream_id);
    if (!stream || stream->state_ == Stream::State::kFailed) return 0;
    // What a caller has not read is within the window it let the server fill (and
    // reserved); nghttp2 resets a stream past it only once it writes again, after this
    // read, and before our SETTINGS are acknowledged it allows its default window.
    if (stream->body_.size() + length > stream->window_) {
      stream->Fail(InvalidResponse(session.origin_key_,
                                   absl::StrCat("more DATA than the stream's flow-control "
                                                "window of ",
                                                stream->window_,
                                                " bytes allows (FLOW_CONTROL_ERROR)")));
      return 0;
    }
    stream->body_.commit(net::buffer_copy(stream->body_.prepare(length), net::buffer(data, length)));
    stream->buffered_bytes_ = stream->body_.size();
    session.UpdateBufferStats(static_cast<int64_t>(length));
    if (stream->read_done_) stream->MarkReady();
    return 0;
  });
}

int Session::Callbacks::OnStreamClose(
    nghttp2_session*, int32_t stream_id, uint32_t error_code, void* user_data) {
  return Protected(user_data, [&](Session& session) {
    session.OnStreamClosed(stream_id, error_code);
    return 0;
  });
}

int Session::Callbacks::OnFrameSent(
    nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
  return Protected(user_data, [&](Session& session) {
    Stream* stream = session.Find(frame->hd.stream_id);
    switch (frame->hd.type) {
      case NGHTTP2_HEADERS:
        if (stream) stream->request_sent_ = true;
        break;
      case NGHTTP2_RST_STREAM:
        // Egress fails a stream before it resets it; this one nghttp2 reset itself, for
        // a response that broke HTTP/2's rules (more DATA than the window allowed).
        if (stream && stream->state_ != Stream::State::kFailed) {
          stream->Fail(InvalidResponse(
              session.origin_key_,
              absl::StrCat("egress reset the stream (",
                           ErrorCodeName(frame->rst_stream.error_code), ")")));
        }
        break;
      case NGHTTP2_GOAWAY:
        // nghttp2 ends the session for what the server did (its message says what).
        if (frame->goaway.error_code != NGHTTP2_NO_ERROR && !session.ending_) {
          const absl::string_view debug(reinterpret_cast<const char*>(frame->goaway.opaque_data),
                                        frame->goaway.opaque_data_len);
          const std::string what = absl::StrCat(
              debug.empty() ? std::exchange(session.library_message_, {}) : absl::CEscape(debug),
              " (", ErrorCodeName(frame->goaway.error_code), ")");
          session.ending_ =
              frame->goaway.error_code == NGHTTP2_ENHANCE_YOUR_CALM
                  ? LimitExceeded(session.origin_key_, what)
                  : ProtocolError(session.origin_key_, what);
        }
        break;
      default:
        break;
    }
    return 0;
  });
}

int Session::Callbacks::OnFrameNotSent(
    nghttp2_session*, const nghttp2_frame* frame, int library_error, void* user_data) {
  return Protected(user_data, [&](Session& session) {
    Stream* stream = session.Find(frame->hd.stream_id);
    if (frame->hd.type != NGHTTP2_HEADERS || !stream) return 0;
    if (library_error == NGHTTP2_ERR_FRAME_SIZE_ERROR) {
      stream->Fail(WithReason(absl::ResourceExhaustedError(absl::StrCat(
                                                 "the request's headers are more than ",
                                                 kMaxRequestHeaderBlockBytes,
                                                 " bytes compressed, more than egress "
                                                 "sends over HTTP/2")),
                                             "REQUEST_TOO_LARGE"));
    } else if (library_error == NGHTTP2_ERR_START_STREAM_NOT_ALLOWED &&
               session.goaway_last_stream_id_) {
      stream->Fail(NotProcessed(session.origin_key_,
                                "the server sent GOAWAY before the request went out"));
    } else {
      stream->Fail(NotProcessed(session.origin_key_,
                                absl::StrCat("the request could not be sent (",
                                             nghttp2_strerror(library_error), ")")));
    }
    // Never opened: nghttp2 will not close it.
    if (!nghttp2_session_find_stream(session.session_.get(), frame->hd.stream_id)) {
      stream->Close();
      session.streams_.erase(frame->hd.stream_id);  // ready_ holds it now
    }
    return 0;
  });
}

int Session::Callbacks::OnInvalidFrame(
    nghttp2_session*, const nghttp2_frame* frame, int library_error, void* user_data) {
  return Protected(user_data, [&](Session& session) {
    Stream* stream = session.Find(frame->hd.stream_id);
    if (stream) {
      // nghttp2's message (if it gave one for this frame) says more than its code.
      std::string what = std::exchange(session.library_message_, {});
      if (what.empty()) what = nghttp2_strerror(library_error);
      stream->Fail(InvalidResponse(session.origin_key_, what));
    }
    return 0;
  });
}

int Session::Callbacks::OnError(
    nghttp2_session*, int /*library_error*/, const char* message, size_t length, void* user_data) {
  return Protected(user_data, [&](Session& session) {
    // It may quote the server's bytes.
    session.library_message_ =
        absl::CEscape(absl::string_view(message, std::min(length, kMaxQuotedBytes)));
    return 0;
  });
}

ssize_t Session::Callbacks::ReadRequestBody(
    nghttp2_session*, int32_t /*stream_id*/, uint8_t* buffer, size_t length, uint32_t* flags,
    nghttp2_data_source* source, void* user_data) {
  return Protected(user_data, [&](Session&) {
    auto& stream = *static_cast<Stream*>(source->ptr);
    const size_t n = std::min(length, stream.request_body_size_ - stream.request_body_sent_);
    std::memcpy(buffer, stream.request_body_.view().data() + stream.request_body_sent_, n);
    stream.request_body_sent_ += n;
    if (stream.request_body_sent_ == stream.request_body_size_) {
      *flags |= NGHTTP2_DATA_FLAG_EOF;
      stream.request_body_ = {};  // sent: nghttp2 holds its last frame
    }
    return static_cast<int>(n);
  });
}

}  // namespace egress::transport::http2
