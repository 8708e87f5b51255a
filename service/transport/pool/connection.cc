#include "service/transport/pool/connection.h"

#include <algorithm>
#include <chrono>
#include <iostream>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "boost/asio/dispatch.hpp"
#include "boost/asio/post.hpp"
#include "service/transport/http1/idle_probe.h"
#include "service/transport/http1/wire_errors.h"
#include "service/transport/io/socket_errors.h"

namespace egress::transport {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

Connection::Connection(Executor executor, std::shared_ptr<net::ssl::context> tls_context,
                       Origin origin, uint64_t id, TransportObserver& observer)
    : id_(id),
      origin_(std::move(origin)),
      loop_(executor),
      observer_(observer),
      tls_context_(std::move(tls_context)),
      stream_(executor, *tls_context_, origin_.tls),
      read_cutoff_(executor) {}

void Connection::SetPooled(bool idle) {
  const ConnectionState to = idle ? ConnectionState::kIdle : ConnectionState::kActive;
  const ConnectionState from = state_.exchange(to);
  if (from != to) observer_.OnConnectionStateChanged(origin_, from, to);
}

void Connection::MarkClosed(CloseReason reason) {
  const ConnectionState from = state_.exchange(ConnectionState::kClosed);
  if (from != ConnectionState::kClosed && opened_) {
    observer_.OnConnectionClosed(origin_, reason, from);
    // session_ was set before opened_: read here, it is the dial's.
    if (session_) observer_.OnHttp2ConnectionClosed(session_->streams_opened());
  }
}

std::optional<net::ip::address> Connection::remote_ip() const {
  if (!opened_) return std::nullopt;  // set after remote_endpoint_, which stays put then
  return remote_endpoint_.address();
}

void Connection::ExpireAfter(absl::Duration timeout) {
  phase_timeout_ = timeout;
  const absl::Duration budget = std::min(timeout, deadline_ - absl::Now());
  if (budget > absl::Hours(24)) {
    stream_.tcp().expires_never();
  } else {
    stream_.tcp().expires_after(absl::ToChronoNanoseconds(std::max(budget, absl::ZeroDuration())));
  }
}

absl::Status Connection::Fail(absl::string_view phase, beast::error_code ec) {
  const std::string origin = origin_.Key();
  return WireFailure(FailedStep{phase, origin, deadline_, phase_timeout_}, ec, limits_,
                     limit_hit_, stream_.use_tls() ? stream_.tls().native_handle() : nullptr);
}

void Connection::OnDialed(bool http2) {
  if (http2) {
    const TransportSettings& s = dial_settings_;
    http2::SessionLimits limits;
    limits.max_concurrent_streams = s.http2.max_concurrent_streams;
    limits.stream_window_bytes = s.http2.stream_window_bytes;
    limits.connection_window_bytes = s.http2.connection_window_bytes;
    limits.max_header_list_bytes = s.max_response_header_bytes;
    limits.max_interim_responses = s.max_interim_responses;
    http2::Session::Events events;
    events.unusable = [ended = session_ended_](const absl::Status&) {
      if (ended) ended();
    };
    session_ = std::make_shared<http2::Session>(stream_, shared_from_this(), origin_, limits,
                                                observer_, std::move(events));
    session_->Start();
    protocol_ = Protocol::kHttp2;
  }
  state_ = ConnectionState::kActive;
  opened_ = true;
  observer_.OnConnectionOpened(origin_, dial_timing_);
  std::exchange(status_done_, nullptr)(absl::OkStatus());
}

std::shared_ptr<http2::Stream> Connection::OpenStream(const HttpRequest& request,
                                                      absl::Time deadline,
                                                      http2::Stream::HeadCallback on_head) {
  ++requests_;
  return session_->Open(request, deadline, std::move(on_head));
}

std::optional<KeepAliveHint> Connection::keep_alive_hint() const {
  std::lock_guard<std::mutex> lock(hint_mu_);
  return hint_;
}

void Connection::ReleaseIdleBuffers() {
  read_size_.Reset();
  if (buffer_.size() == 0) buffer_.shrink_to_fit();
  stream_.ReleaseIdleBuffers();
}

void Connection::OnException(absl::string_view what) {
  observer_.OnTransportException();
  std::cerr << "egressd: transport: exception in an I/O handler for " << origin_.Key()
            << " (connection " << id_ << "): " << what << "; closing the connection\n";
  broken_ = true;
  CloseOnStrand();
  const absl::Status status = absl::InternalError(
      absl::StrCat("internal error in egress while talking to ", origin_.Key(), " (", what,
                   "); the connection was closed"));
  // The operation under way ends with it, unless its own callback is what threw.
  step_done_ = nullptr;
  if (status_done_) std::exchange(status_done_, nullptr)(status);
  if (head_done_) std::exchange(head_done_, nullptr)(status, true);
  if (read_done_) std::exchange(read_done_, nullptr)(status);
  drainer_.Abort(DrainAbandonReason::kError);
}

void Connection::DrainBody(const Drain& caps, DrainBudget* budget, uint64_t reserved,
                           DrainCallback done) {
  // The progress is in place before the pool can see the connection draining. No I/O is
  // pending between the response and its drain, so the parser may be read here.
  const absl::Time start = absl::Now();
  drainer_.Announce(start, KnownBodyBytesLeft(*parser_));
  state_ = ConnectionState::kDraining;
  observer_.OnDrainStarted(origin_);
  net::dispatch(stream_.get_executor(), [self = shared_from_this(), caps, budget, reserved,
                                         start, done = std::move(done)]() mutable {
    self->phase_timeout_ = caps.max_duration;
    // As ReadBody's buffer (an unread body is often in buffer_ already, a few bytes).
    const size_t buffer_bytes = BodyBufferSize(*self->parser_, kDrainReadBytes);
    self->drainer_.Start(
        caps, budget, reserved, start, buffer_bytes,
        [self, done = std::move(done)](const DrainOutcome& outcome) {
          if (!self->broken_) self->stream_.tcp().expires_never();
          self->state_ = ConnectionState::kActive;
          if (outcome.abandoned) {
            self->observer_.OnDrainAbandoned(self->origin_, *outcome.abandoned, outcome.bytes,
                                             outcome.duration);
          } else {
            self->observer_.OnDrainCompleted(self->origin_, outcome.bytes, outcome.duration);
          }
          done(outcome);
        });
  });
}

DrainProgress Connection::drain_progress() const { return drainer_.progress(); }

bool Connection::DrainSource::BodyEnded() const { return connection_.parser_->is_done(); }

std::optional<uint64_t> Connection::DrainSource::KnownBytesLeft() const {
  return KnownBodyBytesLeft(*connection_.parser_);
}

void Connection::DrainSource::ReadSome(char* buffer, size_t size, absl::Duration pause,
                                       absl::Time deadline, BodyDrainer::ReadDone done) {
  Connection& c = connection_;
  LendBodyBuffer(*c.parser_, buffer, size);
  c.deadline_ = deadline;
  c.ExpireAfter(pause);
  c.ReadSomeBounded([self = c.shared_from_this(), size,
                     done = std::move(done)](beast::error_code ec) {
    if (ec == http::error::need_buffer) ec = {};  // the scratch buffer is full
    const size_t bytes = BodyBytesFilled(*self->parser_, size);
    if (ec) self->broken_ = true;
    done(ec, bytes);
  });
}

bool Connection::StillOpenAndQuiet() {
  if (closing_) return false;  // its socket is closed, or about to be: poll would skip it
  if (session_) return session_->Usable();  // its read is always pending: no poll
  switch (ProbeIdle(stream_)) {
    case IdleProbe::kQuiet:
      return true;
    case IdleProbe::kQuietAfterTls:
      ReleaseIdleBuffers();  // what taking in a ticket allocated
      return true;
    case IdleProbe::kClosedOrNoisy:
      return false;
  }
  return false;
}

void Connection::Close() {
  closing_ = true;
  net::post(stream_.get_executor(), [self = shared_from_this()] { self->CloseOnStrand(); });
}

void Connection::Abandon() {
  if (session_) std::exchange(session_, nullptr)->Abandon();
  CloseOnStrand();
  step_done_ = nullptr;
  status_done_ = nullptr;
  head_done_ = nullptr;
  read_done_ = nullptr;
  drainer_.Drop();
}

void Connection::CloseOnStrand() {
  closing_ = true;
  if (session_) session_->Close();  // its streams fail; the socket closes below
  if (auto lookup = lookup_.lock()) lookup->Cancel();
  if (auto race = race_.lock()) race->Cancel();
  read_cutoff_.cancel();
  // No TLS close_notify: the peer learns of the close from TCP, as with most clients,
  // and waiting for a slow peer's answer would hold the connection open.
  beast::error_code ignored;
  stream_.tcp().socket().shutdown(tcp::socket::shutdown_both, ignored);
  stream_.tcp().close();
}

}  // namespace egress::transport
