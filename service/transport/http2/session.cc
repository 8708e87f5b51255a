#include "service/transport/http2/session.h"

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iostream>
#include <new>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "boost/asio/dispatch.hpp"
#include "boost/asio/post.hpp"
#include "boost/asio/ssl/error.hpp"
#include "boost/asio/write.hpp"
#include "service/base/error_reason.h"
#include "service/transport/http2/request_headers.h"

namespace egress::transport::http2 {

namespace net = boost::asio;
namespace beast = boost::beast;

namespace {

constexpr size_t kReadBufferBytes = 16 * 1024;
// What one write carries at most: nghttp2 keeps the rest queued (and counts the
// acknowledgements among it against max_queued_acks).
constexpr size_t kMaxWriteBatchBytes = 64 * 1024;
// A request's header block, compressed, at most (nghttp2's default, made explicit).
constexpr size_t kMaxRequestHeaderBlockBytes = 64 * 1024;
// The bytes of a server's GOAWAY debug data or nghttp2's message quoted in an error.
constexpr size_t kMaxQuotedBytes = 200;

std::string Quote(absl::string_view text) {
  return absl::StrCat("\"", absl::CEscape(text.substr(0, kMaxQuotedBytes)),
                      text.size() > kMaxQuotedBytes ? "...\"" : "\"");
}

std::string ErrorCodeName(uint32_t error_code) {
  return nghttp2_http2_strerror(error_code);
}

}  // namespace

bool WasNotProcessed(const absl::Status& status) {
  const std::optional<ErrorReason> reason = ReasonOf(status);
  return reason && reason->reason == kNotProcessedReason;
}

// nghttp2's callbacks: each finds the session in user_data, records what happened and
// returns; user callbacks run later, from Settle. An exception is caught here: it must
// not unwind through nghttp2.
struct Session::Callbacks {
  template <class F>
  static int Protected(void* user_data, F&& body) {
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

  static int OnBeginHeaders(nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
    return Protected(user_data, [&](Session& session) {
      if (Stream* stream = session.Find(frame->hd.stream_id)) {
        stream->header_list_bytes_ = 0;
        stream->head_in_progress_ = ResponseHead{};
      }
      return 0;
    });
  }

  static int OnHeader(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name_data,
                      size_t name_length, const uint8_t* value_data, size_t value_length,
                      uint8_t /*flags*/, void* user_data) {
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
        session.FailStream(*stream, session.LimitExceeded(absl::StrCat(
                                        head ? "response headers" : "trailers",
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

  static int OnFrameReceived(nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
    return Protected(user_data, [&](Session& session) {
      const bool end_stream = frame->hd.flags & NGHTTP2_FLAG_END_STREAM;
      switch (frame->hd.type) {
        case NGHTTP2_HEADERS:
          if (Stream* stream = session.Find(frame->hd.stream_id)) {
            session.OnHeadersReceived(*stream, end_stream);
          }
          break;
        case NGHTTP2_DATA:
          if (Stream* stream = session.Find(frame->hd.stream_id); stream && end_stream) {
            session.EndBody(*stream);
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

  static int OnDataChunk(nghttp2_session*, uint8_t /*flags*/, int32_t stream_id,
                         const uint8_t* data, size_t length, void* user_data) {
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
        session.FailStream(*stream, WithReason(absl::UnavailableError(absl::StrCat(
                                                   "invalid HTTP/2 response from ",
                                                   session.origin_key_,
                                                   ": more DATA than the stream's "
                                                   "flow-control window of ",
                                                   stream->window_,
                                                   " bytes allows (FLOW_CONTROL_ERROR)")),
                                               "UPSTREAM_INVALID_RESPONSE",
                                               {{"origin", session.origin_key_}}));
        return 0;
      }
      stream->body_.commit(net::buffer_copy(stream->body_.prepare(length), net::buffer(data, length)));
      stream->buffered_bytes_ = stream->body_.size();
      session.UpdateBufferStats(static_cast<int64_t>(length));
      if (stream->read_done_) session.MarkReady(*stream);
      return 0;
    });
  }

  static int OnStreamClose(nghttp2_session*, int32_t stream_id, uint32_t error_code,
                           void* user_data) {
    return Protected(user_data, [&](Session& session) {
      session.OnStreamClosed(stream_id, error_code);
      return 0;
    });
  }

  static int OnFrameSent(nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
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
            session.FailStream(*stream, WithReason(
                absl::UnavailableError(absl::StrCat(
                    "invalid HTTP/2 response from ", session.origin_key_,
                    ": egress reset the stream (", ErrorCodeName(frame->rst_stream.error_code),
                    ")")),
                "UPSTREAM_INVALID_RESPONSE", {{"origin", session.origin_key_}}));
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
                    ? session.LimitExceeded(what)
                    : WithReason(absl::UnavailableError(absl::StrCat(
                                     "HTTP/2 protocol error from ", session.origin_key_, ": ",
                                     what, "; the connection was closed")),
                                 "UPSTREAM_PROTOCOL_ERROR", {{"origin", session.origin_key_}});
          }
          break;
        default:
          break;
      }
      return 0;
    });
  }

  static int OnFrameNotSent(nghttp2_session*, const nghttp2_frame* frame, int library_error,
                            void* user_data) {
    return Protected(user_data, [&](Session& session) {
      Stream* stream = session.Find(frame->hd.stream_id);
      if (frame->hd.type != NGHTTP2_HEADERS || !stream) return 0;
      if (library_error == NGHTTP2_ERR_FRAME_SIZE_ERROR) {
        session.FailStream(*stream, WithReason(absl::ResourceExhaustedError(absl::StrCat(
                                                   "the request's headers are more than ",
                                                   kMaxRequestHeaderBlockBytes,
                                                   " bytes compressed, more than egress "
                                                   "sends over HTTP/2")),
                                               "REQUEST_TOO_LARGE"));
      } else if (library_error == NGHTTP2_ERR_START_STREAM_NOT_ALLOWED &&
                 session.goaway_last_stream_id_) {
        session.FailStream(*stream, session.NotProcessed(
                                        "the server sent GOAWAY before the request went out"));
      } else {
        session.FailStream(*stream, session.NotProcessed(absl::StrCat(
                                        "the request could not be sent (",
                                        nghttp2_strerror(library_error), ")")));
      }
      // Never opened: nghttp2 will not close it.
      if (!nghttp2_session_find_stream(session.session_.get(), frame->hd.stream_id)) {
        session.CloseStream(*stream);
        session.streams_.erase(frame->hd.stream_id);  // ready_ holds it now
      }
      return 0;
    });
  }

  static int OnInvalidFrame(nghttp2_session*, const nghttp2_frame* frame, int library_error,
                            void* user_data) {
    return Protected(user_data, [&](Session& session) {
      Stream* stream = session.Find(frame->hd.stream_id);
      if (stream) {
        // nghttp2's message (if it gave one for this frame) says more than its code.
        std::string what = std::exchange(session.library_message_, {});
        if (what.empty()) what = nghttp2_strerror(library_error);
        session.FailStream(*stream, WithReason(absl::UnavailableError(absl::StrCat(
                                                   "invalid HTTP/2 response from ",
                                                   session.origin_key_, ": ", what)),
                                               "UPSTREAM_INVALID_RESPONSE",
                                               {{"origin", session.origin_key_}}));
      }
      return 0;
    });
  }

  static int OnError(nghttp2_session*, int /*library_error*/, const char* message,
                     size_t length, void* user_data) {
    return Protected(user_data, [&](Session& session) {
      // It may quote the server's bytes.
      session.library_message_ =
          absl::CEscape(absl::string_view(message, std::min(length, kMaxQuotedBytes)));
      return 0;
    });
  }

  static ssize_t ReadRequestBody(nghttp2_session*, int32_t /*stream_id*/, uint8_t* buffer,
                                 size_t length, uint32_t* flags, nghttp2_data_source* source,
                                 void* user_data) {
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
};

Session::Session(UpstreamStream& upstream, std::shared_ptr<void> upstream_owner, Origin origin,
                 SessionLimits limits, TransportObserver& observer, Events events)
    : upstream_(upstream),
      upstream_owner_(std::move(upstream_owner)),
      executor_(upstream.get_executor()),
      origin_(std::move(origin)),
      origin_key_(origin_.Key()),
      limits_(limits),
      observer_(observer),
      events_(std::move(events)),
      session_(nullptr, &nghttp2_session_del),
      server_max_streams_(limits.max_concurrent_streams),
      read_buffer_(kReadBufferBytes),
      write_timer_(executor_) {
  nghttp2_session_callbacks* callbacks = nullptr;
  if (nghttp2_session_callbacks_new(&callbacks) != 0) throw std::bad_alloc();
  std::unique_ptr<nghttp2_session_callbacks, void (*)(nghttp2_session_callbacks*)> owned_callbacks(
      callbacks, &nghttp2_session_callbacks_del);
  nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks, &Callbacks::OnBeginHeaders);
  nghttp2_session_callbacks_set_on_header_callback(callbacks, &Callbacks::OnHeader);
  nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, &Callbacks::OnFrameReceived);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, &Callbacks::OnDataChunk);
  nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, &Callbacks::OnStreamClose);
  nghttp2_session_callbacks_set_on_frame_send_callback(callbacks, &Callbacks::OnFrameSent);
  nghttp2_session_callbacks_set_on_frame_not_send_callback(callbacks, &Callbacks::OnFrameNotSent);
  nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(callbacks,
                                                               &Callbacks::OnInvalidFrame);
  nghttp2_session_callbacks_set_error_callback2(callbacks, &Callbacks::OnError);

  nghttp2_option* option = nullptr;
  if (nghttp2_option_new(&option) != 0) throw std::bad_alloc();
  std::unique_ptr<nghttp2_option, void (*)(nghttp2_option*)> owned_option(option,
                                                                          &nghttp2_option_del);
  // Windows reopen as callers read (TakeBody), not as bytes arrive.
  nghttp2_option_set_no_auto_window_update(option, 1);
  // Until the server's SETTINGS say otherwise.
  nghttp2_option_set_peer_max_concurrent_streams(option, limits_.max_concurrent_streams);
  nghttp2_option_set_max_outbound_ack(option, limits_.max_queued_acks);
  nghttp2_option_set_max_settings(option, limits_.max_settings_entries);
  nghttp2_option_set_max_send_header_block_length(option, kMaxRequestHeaderBlockBytes);
  // Closed streams are kept only for RFC 7540's priority tree, which egress does not use.
  nghttp2_option_set_no_closed_streams(option, 1);

  nghttp2_session* session = nullptr;
  if (nghttp2_session_client_new2(&session, callbacks, this, option) != 0) {
    throw std::bad_alloc();
  }
  session_.reset(session);
}

Session::~Session() = default;

void Session::OnException(absl::string_view what) {
  observer_.OnTransportException();
  std::cerr << "egressd: transport: exception in an HTTP/2 handler for " << origin_key_
            << ": " << what << "; closing the connection\n";
  End(absl::InternalError(absl::StrCat("internal error in egress while talking HTTP/2 to ",
                                       origin_key_, " (", what,
                                       "); the connection was closed")));
}

void Session::Start() {
  // At once when called on the loop (the dial's handler): a post from there waits in the
  // thread's own queue until the handler returns, and a stream opened meanwhile from
  // another thread (the pool hands the connection out when the handler reports it)
  // reached the loop first and found the session not started.
  net::dispatch(executor_,
                [self = shared_from_this()] { self->Guard([&] { self->StartOnLoop(); }); });
}

void Session::StartOnLoop() {
  if (state_ != State::kNew) return;  // closed first
  state_ = State::kOpen;
  const nghttp2_settings_entry settings[] = {
      {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, InitialStreamWindow()},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, limits_.max_header_list_bytes},
  };
  int result = nghttp2_submit_settings(session_.get(), NGHTTP2_FLAG_NONE, settings,
                                       sizeof(settings) / sizeof(settings[0]));
  if (result == 0) {
    result = nghttp2_session_set_local_window_size(session_.get(), NGHTTP2_FLAG_NONE, 0,
                                                   limits_.connection_window_bytes);
  }
  if (result != 0) return End(LibraryFailure(result));
  ReadMore();
  Settle();
}

bool Session::Usable() const {
  const State state = state_;
  return (state == State::kNew || state == State::kOpen) && !closing_;
}

uint32_t Session::StreamLimit() const {
  return std::min(limits_.max_concurrent_streams, server_max_streams_.load());
}

bool Session::CanOpenStream() const { return Usable() && open_streams_ < StreamLimit(); }

bool Session::TakeSlot() {
  uint32_t open = open_streams_;
  do {
    if (!Usable() || open >= StreamLimit()) return false;
  } while (!open_streams_.compare_exchange_weak(open, open + 1));
  return true;
}

std::shared_ptr<Stream> Session::Open(const HttpRequest& request, absl::Time deadline,
                                      HeadCallback on_head) {
  absl::StatusOr<HeaderList> headers = RequestHeaderBlock(request);
  auto stream = std::make_shared<Stream>(shared_from_this(), request.body, request.body_memory,
                                         std::move(on_head));
  const bool slot = headers.ok() && TakeSlot();
  if (!slot) stream->closed_ = true;  // it was given no place
  net::post(executor_, [self = shared_from_this(), stream, headers = std::move(headers), slot,
                        deadline, method = request.method] {
    self->Guard([&] {
      if (!headers.ok()) {
        // MakeRequest refuses what cannot be written; this is the defence should a
        // request reach here some other way.
        self->observer_.OnTransportException();
        self->FailStream(*stream, absl::InternalError(absl::StrCat(
                                      "egress could not write the ", method, " request for ",
                                      self->origin_key_, ": ", headers.status().message())));
        return self->Settle();
      }
      if (!slot) {
        self->FailStream(*stream, self->NotProcessed(
                                      self->Usable()
                                          ? absl::StrCat("no HTTP/2 stream was free on the "
                                                         "connection (",
                                                         self->open_streams_.load(), " of ",
                                                         self->StreamLimit(), " open)")
                                          : std::string("the HTTP/2 connection takes no new "
                                                        "streams (GOAWAY, closed or failed)")));
        return self->Settle();
      }
      self->Submit(stream, *headers, deadline);
    });
  });
  return stream;
}

void Session::Submit(const std::shared_ptr<Stream>& stream, const HeaderList& headers,
                     absl::Time deadline) {
  if (stream->state_ == Stream::State::kFailed) {  // reset by its caller before this ran
    CloseStream(*stream);
    return Settle();
  }
  if (state_ != State::kOpen) {
    CloseStream(*stream);
    FailStream(*stream, NotProcessed(state_ == State::kEnded
                                         ? "the HTTP/2 connection had ended"
                                         : "the server had sent GOAWAY"));
    return Settle();
  }
  // The stream's first window, reserved before the server can fill it: refused, the
  // request fails at once and is not sent.
  if (absl::Status refused = ReserveWindow(*stream, InitialStreamWindow()); !refused.ok()) {
    FailStream(*stream, std::move(refused));
    return Settle();
  }
  std::vector<nghttp2_nv> fields;
  fields.reserve(headers.size());
  for (const auto& [name, value] : headers) {
    fields.push_back({reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
                      reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(),
                      value.size(), NGHTTP2_NV_FLAG_NONE});
  }
  nghttp2_data_provider body{};
  body.source.ptr = stream.get();
  body.read_callback = &Callbacks::ReadRequestBody;
  const int32_t id = nghttp2_submit_request(session_.get(), nullptr, fields.data(), fields.size(),
                                            stream->request_body_size_ > 0 ? &body : nullptr,
                                            nullptr);
  if (id < 0) {
    CloseStream(*stream);
    if (id == NGHTTP2_ERR_STREAM_ID_NOT_AVAILABLE) {
      state_ = State::kGoingAway;
      const absl::Status why = NotProcessed("the HTTP/2 connection has used all its stream ids");
      ReportUnusable(why);
      FailStream(*stream, why);
    } else {
      FailStream(*stream, absl::InternalError(absl::StrCat(
                              "egress could not send the request to ", origin_key_,
                              " over HTTP/2: ", nghttp2_strerror(id))));
    }
    return Settle();
  }
  stream->id_ = id;
  streams_.emplace(id, stream);
  ++streams_opened_;
  stream->SetDeadline(deadline);
  Settle();
}

void Session::Ping(absl::Duration timeout, StatusCallback done) {
  net::post(executor_, [self = shared_from_this(), timeout, done = std::move(done)]() mutable {
    self->Guard([&] { self->PingOnLoop(timeout, std::move(done)); });
  });
}

void Session::PingOnLoop(absl::Duration timeout, StatusCallback done) {
  if (state_ == State::kEnded || state_ == State::kNew) {
    return done(state_ == State::kEnded ? ForCaller(ended_)
                                        : absl::FailedPreconditionError(
                                              "the HTTP/2 session has not been started"));
  }
  const uint64_t opaque = ++pings_sent_;
  uint8_t data[8];
  std::memcpy(data, &opaque, sizeof(data));
  if (const int result = nghttp2_submit_ping(session_.get(), NGHTTP2_FLAG_NONE, data);
      result != 0) {
    return End(LibraryFailure(result));
  }
  PendingPing& ping = pings_[opaque];
  ping.done = std::move(done);
  ping.timer = std::make_unique<net::steady_timer>(executor_);
  ping.timer->expires_after(absl::ToChronoNanoseconds(timeout));
  ping.timer->async_wait([self = shared_from_this(), opaque, timeout](beast::error_code ec) {
    if (ec) return;  // answered, or the session ended
    self->Guard([&] {
      const auto ping = self->pings_.find(opaque);
      if (ping == self->pings_.end()) return;
      StatusCallback late = std::move(ping->second.done);
      self->pings_.erase(ping);
      late(WithReason(absl::DeadlineExceededError(absl::StrCat(
                          "no answer to a PING from ", self->origin_key_, " within ",
                          absl::FormatDuration(timeout))),
                      "UPSTREAM_TIMEOUT", {{"origin", self->origin_key_}, {"phase", "ping"}}));
    });
  });
  Settle();
}

void Session::Close() {
  closing_ = true;
  net::post(executor_, [self = shared_from_this()] {
    self->Guard([&] {
      self->End(WithReason(absl::CancelledError(absl::StrCat(
                               "the HTTP/2 connection to ", self->origin_key_,
                               " was closed by egress")),
                           "CANCELLED", {{"origin", self->origin_key_}}));
    });
  });
}

void Session::Abandon() {
  state_ = State::kEnded;
  for (auto& [id, stream] : std::exchange(streams_, {})) {
    stream->head_done_ = nullptr;
    stream->read_done_ = nullptr;
  }
  for (auto& stream : std::exchange(ready_, {})) {
    stream->head_done_ = nullptr;
    stream->read_done_ = nullptr;
  }
  pings_.clear();
  deferred_.clear();
  beast::error_code ignored;
  upstream_.tcp().socket().close(ignored);
  upstream_owner_.reset();
}

void Session::ReadMore() {
  upstream_.async_read_some(
      net::buffer(read_buffer_),
      [self = shared_from_this(), owner = upstream_owner_](beast::error_code ec, size_t bytes) {
        self->Guard([&] { self->OnRead(ec, bytes); });
      });
}

void Session::OnRead(beast::error_code ec, size_t bytes) {
  if (state_ == State::kEnded) return;  // ended while the read was on its way
  if (ec) return End(IoFailure("reading from", ec));
  const ssize_t taken = nghttp2_session_mem_recv(session_.get(), read_buffer_.data(), bytes);
  if (taken < 0) return End(LibraryFailure(static_cast<int>(taken)));
  Settle();
  if (state_ != State::kEnded && nghttp2_session_want_read(session_.get())) ReadMore();
}

void Session::Flush() {
  if (state_ == State::kEnded || state_ == State::kNew) return;
  while (next_write_.size() < kMaxWriteBatchBytes) {
    const uint8_t* data = nullptr;
    const ssize_t bytes = nghttp2_session_mem_send(session_.get(), &data);
    if (bytes < 0) return End(LibraryFailure(static_cast<int>(bytes)));
    if (bytes == 0) break;
    next_write_.append(reinterpret_cast<const char*>(data), static_cast<size_t>(bytes));
  }
  if (ending_) return End(*std::exchange(ending_, std::nullopt));
  UpdateBufferStats(0);
  if (write_in_flight_) return;
  if (next_write_.empty()) {
    if (!nghttp2_session_want_read(session_.get()) && !nghttp2_session_want_write(session_.get())) {
      const std::string why =
          goaway_last_stream_id_
              ? absl::StrCat(origin_key_, " sent GOAWAY and its last stream has ended")
              : absl::StrCat("the HTTP/2 session with ", origin_key_, " has ended");
      End(WithReason(absl::UnavailableError(why), "UPSTREAM_CLOSED", {{"origin", origin_key_}}));
    }
    return;
  }
  writing_.swap(next_write_);
  write_in_flight_ = true;
  write_timer_.expires_after(absl::ToChronoNanoseconds(limits_.write_timeout));
  write_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (ec) return;  // the write ended first
    self->Guard([&] { self->OnWriteTimeout(); });
  });
  net::async_write(upstream_, net::buffer(writing_),
                   [self = shared_from_this(), owner = upstream_owner_](beast::error_code ec,
                                                                        size_t /*bytes*/) {
                     self->Guard([&] { self->OnWrite(ec); });
                   });
}

void Session::OnWrite(beast::error_code ec) {
  write_in_flight_ = false;
  write_timer_.cancel();
  if (state_ == State::kEnded) return;  // ended while the write was on its way
  if (ec) return End(IoFailure("writing to", ec));
  writing_.clear();
  if (writing_.capacity() > kMaxWriteBatchBytes) std::string().swap(writing_);
  Settle();
}

void Session::OnWriteTimeout() {
  // A completion already on its way when the write ended and cancelled the timer.
  if (!write_in_flight_ || write_timer_.expiry() > std::chrono::steady_clock::now()) return;
  End(WithReason(absl::UnavailableError(absl::StrCat(
                     origin_key_, " has not read what egress wrote to it for ",
                     absl::FormatDuration(limits_.write_timeout),
                     "; the HTTP/2 connection was closed")),
                 "UPSTREAM_TIMEOUT", {{"origin", origin_key_}, {"phase", "writing to"}}));
}

void Session::Settle() {
  do {
    DeliverReady();
    if (received_bytes_ > 0 && state_ != State::kEnded) {
      const int result = nghttp2_session_consume_connection(
          session_.get(), static_cast<size_t>(std::exchange(received_bytes_, 0)));
      if (nghttp2_is_fatal(result)) return End(LibraryFailure(result));
    }
    Flush();
  } while (!ready_.empty() || !deferred_.empty());
}

void Session::DeliverReady() {
  while (!ready_.empty() || !deferred_.empty()) {
    for (auto& stream : std::exchange(ready_, {})) stream->Deliver();
    for (auto& callback : std::exchange(deferred_, {})) callback();
  }
}

void Session::End(absl::Status why) {
  if (state_ == State::kEnded) return;
  state_ = State::kEnded;
  ended_ = why;
  ReportUnusable(why);
  for (auto& [id, stream] : std::exchange(streams_, {})) {
    // A response the server has ended stays readable; our side of it may have been open.
    if (stream->state_ != Stream::State::kBodyEnded) FailStream(*stream, FailureAtEnd(*stream));
    CloseStream(*stream);
  }
  for (auto& [opaque, ping] : std::exchange(pings_, {})) {
    ping.timer->cancel();
    deferred_.push_back([done = std::move(ping.done), why] { done(ForCaller(why)); });
  }
  write_timer_.cancel();
  // No GOAWAY: the server learns of the close from TCP, as after an HTTP/1.1 exchange.
  beast::error_code ignored;
  upstream_.tcp().socket().shutdown(net::ip::tcp::socket::shutdown_both, ignored);
  upstream_.tcp().close();
  DeliverReady();
  upstream_owner_.reset();  // pending handlers hold it until they have run
}

void Session::ReportUnusable(const absl::Status& why) {
  if (std::exchange(unusable_reported_, true)) return;
  if (events_.unusable) deferred_.push_back([this, why] { events_.unusable(ForCaller(why)); });
}

bool Session::ReleasePlace(Stream& stream) {
  if (stream.closed_.exchange(true)) return false;
  --open_streams_;
  return true;
}

void Session::CloseStream(Stream& stream) {
  if (ReleasePlace(stream) && events_.stream_closed) deferred_.push_back(events_.stream_closed);
}

bool Session::AboveGoaway(const Stream& stream) const {
  return goaway_last_stream_id_ && stream.id_ > *goaway_last_stream_id_;
}

Stream* Session::Find(int32_t id) const {
  const auto it = streams_.find(id);
  return it == streams_.end() ? nullptr : it->second.get();
}

void Session::MarkReady(Stream& stream) {
  if (std::exchange(stream.ready_, true)) return;
  ready_.push_back(stream.shared_from_this());
}

void Session::FailStream(Stream& stream, absl::Status why) {
  if (stream.state_ == Stream::State::kFailed) return;
  // Whoever hears of the failure may open another stream at once: its place is free now,
  // whenever nghttp2 lets go of the stream (see Stream::closed_).
  CloseStream(stream);
  stream.state_ = Stream::State::kFailed;
  stream.failure_ = std::move(why);
  DropBody(stream);
  ReleaseSpareWindow(stream);
  stream.deadline_timer_.cancel();
  MarkReady(stream);
}

void Session::ResetStream(Stream& stream, absl::Status why) {
  if (stream.state_ == Stream::State::kFailed) return;
  if (state_ != State::kEnded && streams_.contains(stream.id_)) {
    // Cannot fail for a stream nghttp2 knows; a queued request is simply not sent.
    nghttp2_submit_rst_stream(session_.get(), NGHTTP2_FLAG_NONE, stream.id_, NGHTTP2_CANCEL);
  }
  FailStream(stream, std::move(why));
  Settle();
}

void Session::EndBody(Stream& stream) {
  if (stream.state_ != Stream::State::kBody) return;
  stream.state_ = Stream::State::kBodyEnded;
  stream.body_received_ = true;
  stream.deadline_timer_.cancel();  // the whole body is here
  if (stream.body_.size() == 0) stream.body_ended_ = true;
  ReleaseSpareWindow(stream);
  MarkReady(stream);
}

std::string Session::TakeBody(Stream& stream, size_t max_bytes) {
  const size_t n = std::min(max_bytes, stream.body_.size());
  std::string bytes(static_cast<const char*>(stream.body_.data().data()), n);
  stream.body_.consume(n);
  if (stream.body_.size() == 0) stream.body_.shrink_to_fit();
  stream.buffered_bytes_ = stream.body_.size();
  UpdateBufferStats(-static_cast<int64_t>(n));
  if (state_ != State::kEnded) {
    // The stream's window (the connection's reopened as the bytes came).
    const int result = nghttp2_session_consume_stream(session_.get(), stream.id_, n);
    if (nghttp2_is_fatal(result)) End(LibraryFailure(result));
  }
  GrowWindow(stream, n);
  ReleaseSpareWindow(stream);
  return bytes;
}

uint32_t Session::InitialStreamWindow() const {
  return std::max<uint32_t>(
      1, std::min(limits_.initial_stream_window_bytes, limits_.stream_window_bytes));
}

absl::Status Session::ReserveWindow(Stream& stream, uint64_t bytes) {
  if (stream.memory_) {
    if (absl::Status refused = stream.memory_->TryReserve(bytes); !refused.ok()) return refused;
  }
  stream.window_ += bytes;
  return absl::OkStatus();
}

void Session::GrowWindow(Stream& stream, uint64_t read) {
  if (stream.state_ != Stream::State::kBody || state_ == State::kEnded) return;
  const uint64_t most = limits_.stream_window_bytes;
  const uint64_t more = std::min(read, most - std::min(stream.window_, most));
  if (more == 0) return;
  // nghttp2's own figure, which counts its default window until our SETTINGS are
  // acknowledged and moves with them then: raised by `more`, it sends WINDOW_UPDATE(more).
  const int32_t local =
      nghttp2_session_get_stream_effective_local_window_size(session_.get(), stream.id_);
  if (local < 0 || static_cast<uint64_t>(local) + more > NGHTTP2_MAX_WINDOW_SIZE) return;
  // Refused: the window stays as it is, and the server waits for the caller to read.
  if (!ReserveWindow(stream, more).ok()) return;
  const int result = nghttp2_session_set_local_window_size(
      session_.get(), NGHTTP2_FLAG_NONE, stream.id_, local + static_cast<int32_t>(more));
  if (result != 0) {
    stream.window_ -= more;
    if (stream.memory_) stream.memory_->Release(more);
    if (nghttp2_is_fatal(result)) End(LibraryFailure(result));
  }
}

void Session::ReleaseSpareWindow(Stream& stream) {
  if (stream.state_ != Stream::State::kBodyEnded && stream.state_ != Stream::State::kFailed) {
    return;
  }
  const uint64_t spare = stream.window_ - stream.body_.size();
  if (spare == 0) return;
  stream.window_ -= spare;
  if (stream.memory_) stream.memory_->Release(spare);
}

void Session::DropBody(Stream& stream) {
  const size_t n = stream.body_.size();
  if (n == 0) return;
  stream.body_.consume(n);
  stream.body_.shrink_to_fit();
  stream.buffered_bytes_ = 0;
  UpdateBufferStats(-static_cast<int64_t>(n));
}

void Session::OnStreamDropped(uint64_t unread_bytes) {
  UpdateBufferStats(-static_cast<int64_t>(unread_bytes));
}

void Session::OnStreamDeadline(Stream& stream) {
  if (stream.state_ == Stream::State::kFailed || stream.state_ == Stream::State::kBodyEnded) {
    return;
  }
  ResetStream(stream, DeadlineFailure(stream));
}

void Session::OnHeadersReceived(Stream& stream, bool end_stream) {
  if (stream.state_ == Stream::State::kAwaitingHead) {
    const int status = stream.head_in_progress_.status_code;
    if (status < 100) {  // found by fuzz/http2_response_fuzzer.cc: nghttp2 takes 000-099
      nghttp2_submit_rst_stream(session_.get(), NGHTTP2_FLAG_NONE, stream.id_,
                                NGHTTP2_PROTOCOL_ERROR);
      return FailStream(stream, WithReason(absl::UnavailableError(absl::StrCat(
                                               "invalid HTTP/2 response from ", origin_key_,
                                               ": status code ", status, " is below 100")),
                                           "UPSTREAM_INVALID_RESPONSE", {{"origin", origin_key_}}));
    }
    if (status < 200) {  // interim: the final head follows
      if (++stream.interim_responses_ > limits_.max_interim_responses) {
        observer_.OnUpstreamLimit(origin_, UpstreamLimit::kInterimResponses);
        nghttp2_submit_rst_stream(session_.get(), NGHTTP2_FLAG_NONE, stream.id_, NGHTTP2_CANCEL);
        FailStream(stream, LimitExceeded(absl::StrCat(
                               "more than ", limits_.max_interim_responses,
                               " interim (1xx) responses before the final one "
                               "(transport.max_interim_responses)")));
      }
      return;
    }
    stream.head_ = std::move(stream.head_in_progress_);
    stream.head_in_progress_ = ResponseHead{};
    stream.state_ = Stream::State::kBody;
    MarkReady(stream);
  }
  if (end_stream) EndBody(stream);  // after the head, or after trailers
}

void Session::OnStreamClosed(int32_t id, uint32_t error_code) {
  const auto it = streams_.find(id);
  if (it == streams_.end()) return;
  const std::shared_ptr<Stream> stream = std::move(it->second);
  streams_.erase(it);
  CloseStream(*stream);
  if (stream->state_ == Stream::State::kFailed || stream->state_ == Stream::State::kBodyEnded) {
    return;
  }
  // Not processed only while no response has begun: a head (an interim one included)
  // says the server took the request, whatever it says of the stream afterwards.
  const bool answered = stream->state_ != Stream::State::kAwaitingHead ||
                        stream->interim_responses_ > 0;
  if (error_code == NGHTTP2_REFUSED_STREAM && !answered) {
    return FailStream(*stream,
                      NotProcessed(AboveGoaway(*stream)
                                       ? absl::StrCat("the server sent GOAWAY (last stream ",
                                                      *goaway_last_stream_id_, ", ",
                                                      ErrorCodeName(goaway_error_),
                                                      ") before stream ", id)
                                       : std::string("the server refused the stream "
                                                     "(REFUSED_STREAM)")));
  }
  FailStream(*stream, StreamResetFailure(*stream, error_code));
}

void Session::OnGoaway(int32_t last_stream_id, uint32_t error_code, absl::string_view debug) {
  goaway_last_stream_id_ = last_stream_id;
  goaway_error_ = error_code;
  if (state_ == State::kOpen) state_ = State::kGoingAway;
  ReportUnusable(WithReason(
      absl::UnavailableError(absl::StrCat(
          origin_key_, " sent GOAWAY (", ErrorCodeName(error_code), ", last stream ",
          last_stream_id, debug.empty() ? "" : ", ", debug.empty() ? "" : Quote(debug),
          "): it takes no new streams on this connection")),
      "UPSTREAM_CLOSED", {{"origin", origin_key_}}));
  // nghttp2 closes the streams above last_stream_id itself, with REFUSED_STREAM.
}

absl::Status Session::ForCaller(const absl::Status& status) {
  absl::Status copy(status.code(), status.message());
  status.ForEachPayload([&](absl::string_view type_url, const absl::Cord& payload) {
    copy.SetPayload(type_url, absl::Cord(std::string(payload)));
  });
  return copy;
}

absl::Status Session::NotProcessed(absl::string_view why) const {
  return WithReason(absl::UnavailableError(absl::StrCat(
                        why, "; ", origin_key_,
                        " did not process the request: it may be sent again on another "
                        "connection")),
                    kNotProcessedReason, {{"origin", origin_key_}});
}

absl::Status Session::LimitExceeded(absl::string_view what) const {
  return WithReason(absl::UnavailableError(absl::StrCat("HTTP/2 response from ", origin_key_,
                                                        " went past a limit: ", what)),
                    "UPSTREAM_LIMIT_EXCEEDED", {{"origin", origin_key_}});
}

absl::Status Session::LibraryFailure(int code) {
  if (ending_) return *std::exchange(ending_, std::nullopt);
  switch (code) {
    case NGHTTP2_ERR_FLOODED:
      return LimitExceeded(absl::StrCat(
          "it sent more SETTINGS or PING frames than egress acknowledges while they go "
          "unread (",
          limits_.max_queued_acks, " acknowledgements waiting); a flood"));
    case NGHTTP2_ERR_TOO_MANY_CONTINUATIONS:
      return LimitExceeded("a header block in too many CONTINUATION frames; a flood");
    case NGHTTP2_ERR_NOMEM:
      return WithReason(absl::ResourceExhaustedError(absl::StrCat(
                            "egress ran out of memory in the HTTP/2 session with ", origin_key_)),
                        "LIMIT_EXCEEDED", {{"origin", origin_key_}});
    default: {
      const std::string detail = std::exchange(library_message_, {});
      return WithReason(absl::UnavailableError(absl::StrCat(
                            "HTTP/2 protocol error from ", origin_key_, ": ",
                            nghttp2_strerror(code), detail.empty() ? "" : ": ", detail,
                            "; the connection was closed")),
                        "UPSTREAM_PROTOCOL_ERROR", {{"origin", origin_key_}});
    }
  }
}

absl::Status Session::IoFailure(absl::string_view phase, beast::error_code ec) const {
  if (ec == net::error::eof || ec == net::ssl::error::stream_truncated ||
      ec == net::error::connection_reset) {
    return WithReason(absl::UnavailableError(absl::StrCat(
                          origin_key_, " closed the HTTP/2 connection",
                          goaway_last_stream_id_ ? " after GOAWAY" : "", " (", ec.message(),
                          ")")),
                      "UPSTREAM_CLOSED", {{"origin", origin_key_}, {"phase", phase}});
  }
  return WithReason(absl::UnavailableError(absl::StrCat(phase, " ", origin_key_,
                                                        " failed: ", ec.message())),
                    "UPSTREAM_CONNECTION_FAILED", {{"origin", origin_key_}, {"phase", phase}});
}

absl::Status Session::DeadlineFailure(const Stream& stream) const {
  absl::string_view phase = "waiting for the response from";
  std::string detail;
  if (stream.state_ != Stream::State::kAwaitingHead) {
    phase = "reading the response body from";
  } else if (stream.request_body_sent_ < stream.request_body_size_) {
    phase = "sending the request body to";
    const bool window_closed =
        nghttp2_session_get_stream_remote_window_size(session_.get(), stream.id_) <= 0 ||
        nghttp2_session_get_remote_window_size(session_.get()) <= 0;
    detail = absl::StrCat(" (", stream.request_body_sent_, " of ", stream.request_body_size_,
                          " bytes sent",
                          window_closed ? "; the server's flow-control window stayed closed" : "",
                          ")");
  }
  return WithReason(absl::DeadlineExceededError(absl::StrCat("deadline expired while ", phase,
                                                             " ", origin_key_, detail)),
                    "DEADLINE_EXCEEDED", {{"origin", origin_key_}, {"phase", phase}});
}

absl::Status Session::StreamResetFailure(const Stream& stream, uint32_t error_code) const {
  const absl::string_view when = stream.state_ == Stream::State::kAwaitingHead
                                     ? "before its response head"
                                     : "before the response body ended";
  if (error_code == NGHTTP2_NO_ERROR) {
    return WithReason(absl::UnavailableError(absl::StrCat(
                          origin_key_, " closed the HTTP/2 stream ", when)),
                      "UPSTREAM_CLOSED", {{"origin", origin_key_}});
  }
  // nghttp2 closes the streams above a GOAWAY's last stream id with REFUSED_STREAM; one
  // the server had begun to answer was taken, and may have been processed.
  const std::string how =
      AboveGoaway(stream)
          ? absl::StrCat(" sent GOAWAY (last stream ", *goaway_last_stream_id_, ", ",
                         ErrorCodeName(goaway_error_), ") below HTTP/2 stream ", stream.id_,
                         " ", when, ", which ended it")
          : absl::StrCat(" reset the HTTP/2 stream ", when, " (", ErrorCodeName(error_code), ")");
  return WithReason(
      absl::UnavailableError(absl::StrCat(
          origin_key_, how,
          stream.state_ == Stream::State::kAwaitingHead && stream.interim_responses_ == 0
              ? ""
              : "; it had begun to answer, so it may have processed the request")),
      "UPSTREAM_STREAM_RESET", {{"origin", origin_key_}});
}

absl::Status Session::FailureAtEnd(const Stream& stream) const {
  if (!stream.request_sent_) {
    return NotProcessed(absl::StrCat("the HTTP/2 connection ended before the request was sent (",
                                     ended_.message(), ")"));
  }
  return ended_;
}

void Session::UpdateBufferStats(int64_t body_delta) {
  const uint64_t buffered = buffered_body_bytes_ += body_delta;
  if (buffered > peak_buffered_body_bytes_) peak_buffered_body_bytes_ = buffered;
  const uint64_t writes = next_write_.size() + writing_.size();
  write_buffer_bytes_ = writes;
  if (writes > peak_write_buffer_bytes_) peak_write_buffer_bytes_ = writes;
}

SessionStats Session::stats() const {
  SessionStats stats;
  stats.open_streams = open_streams_;
  stats.streams_opened = streams_opened_;
  stats.buffered_body_bytes = buffered_body_bytes_;
  stats.peak_buffered_body_bytes = peak_buffered_body_bytes_;
  stats.write_buffer_bytes = write_buffer_bytes_;
  stats.peak_write_buffer_bytes = peak_write_buffer_bytes_;
  return stats;
}

}  // namespace egress::transport::http2
