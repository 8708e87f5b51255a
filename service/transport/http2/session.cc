#include "service/transport/http2/session.h"

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iostream>
#include <new>
#include <utility>

#include "absl/strings/str_cat.h"
#include "boost/asio/dispatch.hpp"
#include "boost/asio/post.hpp"
#include "boost/asio/write.hpp"
#include "service/base/error_reason.h"
#include "service/transport/http2/nghttp2_callbacks.h"
#include "service/transport/http2/request_headers.h"

namespace egress::transport::http2 {

namespace net = boost::asio;
namespace beast = boost::beast;

namespace {

constexpr size_t kReadBufferBytes = 16 * 1024;
// What one write carries at most: nghttp2 keeps the rest queued (and counts the
// acknowledgements among it against max_queued_acks).
constexpr size_t kMaxWriteBatchBytes = 64 * 1024;

}  // namespace

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
  Callbacks::Install(callbacks);

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
        stream->Fail(absl::InternalError(absl::StrCat("egress could not write the ", method,
                                                      " request for ", self->origin_key_, ": ",
                                                      headers.status().message())));
        return self->Settle();
      }
      if (!slot) {
        stream->Fail(NotProcessed(
            self->origin_key_,
            self->Usable() ? absl::StrCat("no HTTP/2 stream was free on the connection (",
                                          self->open_streams_.load(), " of ",
                                          self->StreamLimit(), " open)")
                           : std::string("the HTTP/2 connection takes no new streams (GOAWAY, "
                                         "closed or failed)")));
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
    stream->Close();
    return Settle();
  }
  if (state_ != State::kOpen) {
    stream->Close();
    stream->Fail(NotProcessed(origin_key_, state_ == State::kEnded
                                               ? "the HTTP/2 connection had ended"
                                               : "the server had sent GOAWAY"));
    return Settle();
  }
  // The stream's first window, reserved before the server can fill it: refused, the
  // request fails at once and is not sent.
  if (absl::Status refused = stream->ReserveWindow(InitialStreamWindow()); !refused.ok()) {
    stream->Fail(std::move(refused));
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
    stream->Close();
    if (id == NGHTTP2_ERR_STREAM_ID_NOT_AVAILABLE) {
      state_ = State::kGoingAway;
      const absl::Status why =
          NotProcessed(origin_key_, "the HTTP/2 connection has used all its stream ids");
      ReportUnusable(why);
      stream->Fail(why);
    } else {
      stream->Fail(absl::InternalError(absl::StrCat("egress could not send the request to ",
                                                    origin_key_, " over HTTP/2: ",
                                                    nghttp2_strerror(id))));
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
  if (ec) {
    return End(IoFailure(origin_key_, "reading from", ec, goaway_last_stream_id_.has_value()));
  }
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
  if (ec) {
    return End(IoFailure(origin_key_, "writing to", ec, goaway_last_stream_id_.has_value()));
  }
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
    if (stream->state_ != Stream::State::kBodyEnded) {
      stream->Fail(FailureAtEnd(origin_key_, stream->request_sent_, ended_));
    }
    stream->Close();
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

bool Session::AboveGoaway(const Stream& stream) const {
  return goaway_last_stream_id_ && stream.id_ > *goaway_last_stream_id_;
}

Stream* Session::Find(int32_t id) const {
  const auto it = streams_.find(id);
  return it == streams_.end() ? nullptr : it->second.get();
}

void Session::OnStreamClosed(int32_t id, uint32_t error_code) {
  const auto it = streams_.find(id);
  if (it == streams_.end()) return;
  const std::shared_ptr<Stream> stream = std::move(it->second);
  streams_.erase(it);
  stream->Close();
  if (stream->state_ == Stream::State::kFailed || stream->state_ == Stream::State::kBodyEnded) {
    return;
  }
  // Not processed only while no response has begun: a head (an interim one included)
  // says the server took the request, whatever it says of the stream afterwards.
  const bool answered = stream->state_ != Stream::State::kAwaitingHead ||
                        stream->interim_responses_ > 0;
  if (error_code == NGHTTP2_REFUSED_STREAM && !answered) {
    return stream->Fail(NotProcessed(
        origin_key_, AboveGoaway(*stream)
                         ? absl::StrCat("the server sent GOAWAY (last stream ",
                                        *goaway_last_stream_id_, ", ",
                                        ErrorCodeName(goaway_error_), ") before stream ", id)
                         : std::string("the server refused the stream (REFUSED_STREAM)")));
  }
  stream->Fail(StreamResetFailure(
      origin_key_, id, error_code, stream->state_ == Stream::State::kAwaitingHead, answered,
      AboveGoaway(*stream) ? std::optional<Goaway>(Goaway{*goaway_last_stream_id_, goaway_error_})
                           : std::nullopt));
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

uint32_t Session::InitialStreamWindow() const {
  return std::max<uint32_t>(
      1, std::min(limits_.initial_stream_window_bytes, limits_.stream_window_bytes));
}

void Session::OnStreamDropped(uint64_t unread_bytes) {
  UpdateBufferStats(-static_cast<int64_t>(unread_bytes));
}

absl::Status Session::LibraryFailure(int code) {
  if (ending_) return *std::exchange(ending_, std::nullopt);
  return LibraryError(origin_key_, code, limits_.max_queued_acks,
                      std::exchange(library_message_, {}));
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
