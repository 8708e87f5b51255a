#include "service/transport/pool/connection.h"

#include <openssl/ssl.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <iostream>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "boost/asio/dispatch.hpp"
#include "boost/asio/post.hpp"
#include "boost/asio/write.hpp"
#include "boost/beast/core/bind_handler.hpp"
#include "service/base/error_reason.h"
#include "service/transport/http1/idle_probe.h"
#include "service/transport/http1/wire_errors.h"
#include "service/transport/io/socket_errors.h"
#include "service/transport/tls/alpn.h"
#include "service/transport/tls/client_context.h"

namespace egress::transport {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

Connection::Connection(Executor executor, std::shared_ptr<net::ssl::context> tls_context,
                       Origin origin, uint64_t id, TransportObserver& observer)
    : id_(id),
      origin_(std::move(origin)),
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

namespace {

std::string EndpointText(const tcp::endpoint& endpoint) {
  const auto address = endpoint.address();
  const std::string ip = address.to_string();
  return address.is_v6() ? absl::StrCat("[", ip, "]:", endpoint.port())
                         : absl::StrCat(ip, ":", endpoint.port());
}

}  // namespace

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

void Connection::Dial(const TransportSettings& settings, absl::Time deadline,
                      Resolver& resolver, std::optional<std::string> caller,
                      StatusCallback done) {
  net::dispatch(stream_.get_executor(), [self = shared_from_this(), settings, deadline,
                                         &resolver, caller = std::move(caller),
                                         done = std::move(done)]() mutable {
    self->dial_settings_ = std::move(settings);
    self->deadline_ = deadline;
    self->status_done_ = std::move(done);
    self->phase_start_ = absl::Now();
    // Closed before this ran (a cancel posted ahead of it): nothing is looked up or opened.
    if (self->closing_) {
      return std::exchange(self->status_done_, nullptr)(
          absl::CancelledError(absl::StrCat("connecting to ", self->origin_.Key(),
                                            " was cancelled")));
    }
    if (const auto address = HostAddress(self->origin_.host)) {  // no lookup needed
      return self->ConnectChecked({tcp::endpoint(*address, self->origin_.port)});
    }
    // A name deny_hosts denies is not looked up (a fetch's name stage denied it already;
    // this is for dials without a fetch, such as pre-warming).
    if (PolicyVerdict verdict = self->dial_settings_.policy->CheckHost(self->origin_.host);
        verdict.denied) {
      self->observer_.OnPolicyDenied(self->origin_, *verdict.denied);
      self->observer_.OnDnsLookupAvoided();
      return std::exchange(self->status_done_, nullptr)(
          PolicyDenial(self->origin_, verdict, /*caller=*/""));
    }
    self->Resolve(resolver, std::move(caller));
  });
}

void Connection::Resolve(Resolver& resolver, std::optional<std::string> caller) {
  phase_timeout_ = dial_settings_.connect_timeout;
  Resolver::Query query{origin_.host, origin_.port, std::move(caller),
                        std::min(deadline_, absl::Now() + phase_timeout_)};
  lookup_ = resolver.Resolve(std::move(query), dial_settings_.dns, stream_.get_executor(),
                             Guarded(&Connection::OnResolve));
}

void Connection::OnResolve(absl::StatusOr<Resolver::Endpoints> endpoints) {
  dial_timing_.dns = absl::Now() - phase_start_;
  if (!endpoints.ok()) {
    const std::string phase = absl::StrCat("resolving host \"", origin_.host, "\" for");
    const absl::Status& status = endpoints.status();
    absl::Status failure =
        absl::IsDeadlineExceeded(status) ? Fail(phase, beast::error::timeout)
        : absl::IsCancelled(status)
            ? Fail(phase, net::error::operation_aborted)
            : WithReason(absl::Status(status.code(), absl::StrCat(phase, " ", origin_.Key(),
                                                                  " failed: ", status.message())),
                         absl::IsResourceExhausted(status) ? "DNS_LOOKUP_LIMIT" : "DNS_FAILED",
                         {{"origin", origin_.Key()}, {"host", origin_.host}},
                         absl::IsResourceExhausted(status)
                             ? std::optional<absl::Duration>(kRetryAfterLoad)
                             : std::nullopt);
    return std::exchange(status_done_, nullptr)(std::move(failure));
  }
  ConnectChecked(*endpoints);
}

void Connection::ConnectChecked(const std::vector<tcp::endpoint>& endpoints) {
  // The policy sees the resolved addresses and only those it allows are connected to:
  // no second lookup, so a name cannot resolve differently after the check.
  AddressCheck& check = address_check_.emplace();
  for (const auto& endpoint : endpoints) check.addresses.push_back(endpoint.address());
  check.verdict = dial_settings_.policy->CheckAddresses(origin_.host, check.addresses);
  if (const PolicyVerdict& verdict = check.verdict; verdict.denied) {
    observer_.OnPolicyDenied(origin_, *verdict.denied);
    return std::exchange(status_done_, nullptr)(
        PolicyDenial(origin_, verdict, /*caller=*/""));
  }
  std::vector<tcp::endpoint> allowed;
  for (const auto& endpoint : endpoints) {
    const auto& ok = check.verdict.allowed;
    if (std::find(ok.begin(), ok.end(), endpoint.address()) != ok.end()) {
      allowed.push_back(endpoint);
    }
  }
  // Closed while the name was looked up (a cached answer has no lookup to cancel).
  if (closing_) {
    return std::exchange(status_done_, nullptr)(
        Fail(kConnectPhase, net::error::operation_aborted));
  }
  phase_start_ = absl::Now();
  phase_timeout_ = dial_settings_.connect_timeout;
  const absl::Duration budget =
      std::max(std::min(phase_timeout_, deadline_ - phase_start_), absl::ZeroDuration());
  auto race = std::make_shared<ConnectRace>(stream_.get_executor(), std::move(allowed),
                                            dial_settings_.happy_eyeballs_delay, observer_);
  race_ = race;
  race->Start(budget, Guarded(&Connection::OnConnect));
}

void Connection::OnConnect(beast::error_code ec, ConnectRace::Socket socket,
                           tcp::endpoint endpoint) {
  dial_timing_.connect = absl::Now() - phase_start_;
  if (ec) return std::exchange(status_done_, nullptr)(Fail(kConnectPhase, ec));
  stream_.tcp().socket() = std::move(socket);
  remote_endpoint_ = endpoint;
  remote_address_ = EndpointText(endpoint);  // written once: every response reports it
  stream_.tcp().socket().set_option(tcp::no_delay(true), ec);
  if (!stream_.use_tls()) {
    stream_.tcp().expires_never();
    return OnDialed(/*http2=*/dial_settings_.http2.RequiresH2());  // h2c: prior knowledge
  }

  SSL* ssl = stream_.tls().native_handle();
  // SNI is for names only (RFC 6066); the certificate must match the name or the IP.
  if (const std::optional<net::ip::address> ip = HostAddress(origin_.host)) {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), ip->to_string().c_str());
  } else {
    SSL_set_tlsext_host_name(ssl, origin_.host.c_str());
    SSL_set1_host(ssl, origin_.host.c_str());
  }
  // Keyed by the origin, so a session verified for one host is never offered to another
  // (a resumed handshake does not verify the certificate again).
  if (dial_settings_.tls_session_resumption) OfferTlsSession(ssl, origin_.Key());
  if (const Http2Settings& http2 = dial_settings_.http2; http2.OffersH2OverTls() &&
      !http2::OfferHttp2(ssl, /*http1_fallback=*/!http2.RequiresH2())) {
    return std::exchange(status_done_, nullptr)(
        absl::ResourceExhaustedError("TLS: OpenSSL could not set ALPN (out of memory)"));
  }
  phase_start_ = absl::Now();
  ExpireAfter(dial_settings_.tls_handshake_timeout);
  stream_.tls().async_handshake(Guarded(&Connection::OnHandshake));
}

void Connection::OnHandshake(beast::error_code ec) {
  dial_timing_.tls_handshake = absl::Now() - phase_start_;
  SSL* ssl = stream_.tls().native_handle();
  if (ec) {
    // The server may have lost its ticket keys: the next dial does a full handshake.
    ForgetOfferedTlsSession(ssl);
    // Offered h2 alone, a server that speaks only HTTP/1.1 may end the handshake with an
    // alert (no_application_protocol) rather than choose nothing.
    if (dial_settings_.http2.RequiresH2() && ec.category() == net::error::get_ssl_category() &&
        ERR_GET_REASON(ec.value()) == SSL_R_TLSV1_ALERT_NO_APPLICATION_PROTOCOL) {
      return std::exchange(status_done_, nullptr)(Http2NotNegotiated());
    }
    return std::exchange(status_done_, nullptr)(Fail(kTlsPhase, ec));
  }
  dial_timing_.tls_resumed = SSL_session_reused(ssl) == 1;
  // Sessions are kept per origin, so this holds unless the store is wrong: then the
  // session is dropped and the dial fails rather than trust a certificate for another host.
  if (*dial_timing_.tls_resumed && !PeerCertificateMatches(ssl, origin_.host)) {
    ForgetOfferedTlsSession(ssl);
    return std::exchange(status_done_, nullptr)(absl::UnavailableError(absl::StrCat(
        "TLS handshake with ", origin_.Key(), " failed: the resumed session's certificate "
        "does not match host \"", origin_.host, "\"")));
  }
  stream_.tcp().expires_never();
  const bool http2 = http2::NegotiatedProtocol(ssl) == http2::kHttp2Protocol;
  if (!http2 && dial_settings_.http2.RequiresH2()) {
    return std::exchange(status_done_, nullptr)(Http2NotNegotiated());
  }
  // HTTP/2 forbids renegotiation (OfferHttp2 turned it off); HTTP/1.1 may need it (a
  // TLS 1.2 server asking for a client certificate for one location).
  if (!http2) SSL_clear_options(ssl, SSL_OP_NO_RENEGOTIATION);
  ReleaseIdleBuffers();  // a warmed or spare connection may wait long for its first request
  OnDialed(http2);
}

absl::Status Connection::Http2NotNegotiated() const {
  return WithReason(
      absl::UnavailableError(absl::StrCat(
          "TLS handshake with ", origin_.Key(), ": the server did not choose HTTP/2 (h2) by "
          "ALPN, which transport.http2.mode requires for it; set the mode to AUTO to fall "
          "back to HTTP/1.1")),
      "HTTP2_NOT_NEGOTIATED", {{"origin", origin_.Key()}});
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

void Connection::Send(const HttpRequest& request, absl::Duration header_timeout,
                      const ResponseLimits& limits, absl::Time deadline, HeadCallback done) {
  // Serialized here, on the caller's thread, once; MakeRequest has refused what cannot
  // be written, and this is the defence should a request reach here some other way.
  absl::StatusOr<std::string> head = SerializeRequestHead(request);
  if (!head.ok()) {
    observer_.OnTransportException();
    return done(absl::InternalError(absl::StrCat("egress could not write the ", request.method,
                                                 " request for ", request.origin.Key(), ": ",
                                                 head.status().message())),
                false);
  }
  net::dispatch(stream_.get_executor(),
                [self = shared_from_this(), head = *std::move(head), body = request.body,
                 keep_alive = KeepsAlive(request), is_head = request.method == "HEAD",
                 header_timeout, limits, deadline, done = std::move(done)]() mutable {
                  self->request_head_ = std::move(head);
                  self->request_body_ = std::move(body);
                  self->request_keep_alive_ = keep_alive;
                  self->request_is_head_ = is_head;
                  self->deadline_ = deadline;
                  self->limits_ = limits;
                  // Room for a head or trailers at their limit, a chunk line at its own,
                  // and one read beyond: nothing an upstream sends grows it further.
                  self->buffer_.max_size(std::max(limits.max_header_bytes,
                                                  limits.max_chunk_line_bytes) +
                                         size_t{65536});
                  self->interim_responses_ = 0;
                  self->limit_hit_.reset();
                  self->head_done_ = std::move(done);
                  ++self->requests_;
                  self->ExpireAfter(header_timeout);
                  const absl::string_view body_bytes = self->request_body_.view();
                  const std::array<net::const_buffer, 2> wire = {
                      net::buffer(self->request_head_),
                      net::buffer(body_bytes.data(), body_bytes.size())};
                  net::async_write(self->stream_, wire, self->Guarded(&Connection::OnWrite));
                });
}

void Connection::OnWrite(beast::error_code ec, size_t /*bytes_transferred*/) {
  // Sent or not, the request is done with: a connection must not hold a large upload
  // for its lifetime (nor a broken one until it is let go of).
  request_head_.clear();
  request_head_.shrink_to_fit();
  request_body_ = {};
  if (ec) {
    broken_ = true;
    return std::exchange(head_done_, nullptr)(Fail("sending the request to", ec), false);
  }
  ReadHead();
}

void Connection::ReadHead() {
  ResetResponseParser(parser_, limits_.max_header_bytes, request_is_head_);
  // Beast reads max(512, free capacity) bytes, and the buffer is released while the
  // connection idles: without room made here a small response takes three reads.
  buffer_.reserve(std::min(GrowingReadSize::kFirst, buffer_.max_size()));
  http::async_read_header(stream_, buffer_, *parser_, Guarded(&Connection::OnReadHead));
}

void Connection::OnReadHead(beast::error_code ec, size_t /*bytes_transferred*/) {
  if (ec) {
    broken_ = true;
    if (ec == http::error::header_limit) {
      observer_.OnUpstreamLimit(origin_, UpstreamLimit::kResponseHead);
    }
    const bool response_started = parser_->got_some() || buffer_.size() > 0;
    return std::exchange(head_done_, nullptr)(Fail("waiting for the response from", ec),
                                              response_started);
  }
  const unsigned status = parser_->get().result_int();
  if (status == 101) {
    broken_ = true;
    return std::exchange(head_done_, nullptr)(
        WithReason(absl::UnavailableError(absl::StrCat(origin_.Key(),
                                                       " switched protocols (101); egress "
                                                       "carries HTTP/1.1 requests and "
                                                       "responses only")),
                   "UPSTREAM_INVALID_RESPONSE", {{"origin", origin_.Key()}}),
        true);
  }
  if (status < 100) {  // found by fuzz/response_parser_fuzzer.cc: Beast takes 000-099
    broken_ = true;
    return std::exchange(head_done_, nullptr)(
        WithReason(absl::UnavailableError(absl::StrCat("invalid HTTP response from ",
                                                       origin_.Key(), ": status code ", status,
                                                       " is below 100")),
                   "UPSTREAM_INVALID_RESPONSE", {{"origin", origin_.Key()}}),
        true);
  }
  if (status >= 100 && status < 200) {  // interim: the final one follows
    if (++interim_responses_ > limits_.max_interim_responses) {
      broken_ = true;
      observer_.OnUpstreamLimit(origin_, UpstreamLimit::kInterimResponses);
      return std::exchange(head_done_, nullptr)(
          WithReason(absl::UnavailableError(absl::StrCat(
                         "response from ", origin_.Key(), " has more than ",
                         limits_.max_interim_responses,
                         " interim (1xx) responses before its final one "
                         "(transport.max_interim_responses)")),
                     "UPSTREAM_LIMIT_EXCEEDED", {{"origin", origin_.Key()}}),
          true);
    }
    return ReadHead();
  }

  stream_.tcp().expires_never();
  if (parser_->is_done()) ReleaseIdleBuffers();  // a response without a body
  RecordKeepAliveHint();
  std::exchange(head_done_, nullptr)(HeadOf(*parser_), true);
}

void Connection::RecordKeepAliveHint() {
  const auto& fields = parser_->get();
  const auto header = fields.find(http::field::keep_alive);
  if (header == fields.end()) return;
  const auto value = header->value();
  const std::optional<KeepAliveHint> hint =
      ParseKeepAlive(absl::string_view(value.data(), value.size()));
  if (!hint) return;  // malformed: as if not sent
  std::lock_guard<std::mutex> lock(hint_mu_);
  if (!hint_) hint_ = KeepAliveHint{};
  if (hint->timeout) hint_->timeout = hint->timeout;
  if (hint->max) hint_->max = std::min(*hint->max, hint_->max.value_or(*hint->max));
}

std::optional<KeepAliveHint> Connection::keep_alive_hint() const {
  std::lock_guard<std::mutex> lock(hint_mu_);
  return hint_;
}

void Connection::ReadBody(size_t max_bytes, absl::Time deadline, ReadCallback done) {
  net::dispatch(stream_.get_executor(), [self = shared_from_this(), max_bytes, deadline,
                                         done = std::move(done)]() mutable {
    self->read_done_ = std::move(done);
    self->deadline_ = deadline;
    self->phase_timeout_ = absl::InfiniteDuration();
    if (self->parser_->is_done()) {
      return std::exchange(self->read_done_, nullptr)(std::string());
    }
    // The buffer is zero-filled and handed over with each read: never larger than what
    // is left of a body of known length (most are small; the benchmark saw 64 KiB
    // memsets per 1 KiB fetch).
    self->read_buffer_.resize(BodyBufferSize(*self->parser_, max_bytes));
    self->ReadBodyStep();
  });
}

void Connection::ReadBodyStep() {
  LendBodyBuffer(*parser_, read_buffer_.data(), read_buffer_.size());
  ExpireAfter(absl::InfiniteDuration());
  ReadSomeBounded(
      [self = shared_from_this()](beast::error_code ec) {
        if (ec == http::error::need_buffer) ec = {};  // the caller's buffer is full
        if (ec) {
          self->read_cutoff_.cancel();
          self->broken_ = true;
          return std::exchange(self->read_done_, nullptr)(
              self->Fail("reading the response body from", ec));
        }
        const size_t got = BodyBytesFilled(*self->parser_, self->read_buffer_.size());
        if (got == 0 && !self->parser_->is_done()) return self->ReadBodyStep();
        self->read_cutoff_.cancel();
        self->stream_.tcp().expires_never();
        self->read_buffer_.resize(got);
        std::exchange(self->read_done_, nullptr)(std::exchange(self->read_buffer_, {}));
      });
}

void Connection::ReadSomeBounded(StepCallback done) {
  step_done_ = std::move(done);
  if (buffer_.size() == 0) return ReadMore();
  ParseBuffered(/*after_read=*/false);
}

// The loop of Beast's read_some_op, with ExceededLimit() where it would read more.
void Connection::ParseBuffered(bool after_read) {
  beast::error_code ec;
  buffer_.consume(parser_->put(buffer_.data(), ec));
  if (parser_->is_done()) ReleaseIdleBuffers();  // nothing is read until the next request
  if (ec == http::error::need_more) {
    limit_hit_ = ExceededLimit();
    if (!limit_hit_) return ReadMore();
    observer_.OnUpstreamLimit(origin_, *limit_hit_);
    ec = http::error::buffer_overflow;
  }
  if (after_read) return CompleteStep(ec);
  // Nothing was read: complete later, as Beast does, not inside the caller's call.
  net::post(stream_.get_executor(), [self = shared_from_this(), ec] {
    self->Guard([&] { self->CompleteStep(ec); });
  });
}

void Connection::ReadMore() {
  // Through FetchStream, a small read is a chunk and a wake-up (see GrowingReadSize).
  const size_t size = std::min(read_size_.next(), buffer_.max_size() - buffer_.size());
  // Past the deadline no socket read starts: one of bytes already there completes before
  // the expired timer does, so a body as fast as it is read would run on past it.
  // (What is buffered is still parsed: a body that has all arrived still ends.)
  const beast::error_code refused = size == 0 ? beast::error_code(http::error::buffer_overflow)
                                    : absl::Now() >= deadline_ ? beast::error::timeout
                                                               : beast::error_code();
  if (refused) {  // (size 0 cannot happen within the limits above; the buffer bounds it)
    return net::post(stream_.get_executor(), [self = shared_from_this(), refused] {
      self->Guard([&] { self->CompleteStep(refused); });
    });
  }
  stream_.async_read_some(
      buffer_.prepare(size),
      [self = shared_from_this(), size](beast::error_code ec, size_t bytes_transferred) {
        self->Guard([&] {
          self->buffer_.commit(bytes_transferred);
          self->read_size_.Read(size, bytes_transferred);
          if (!self->step_done_) return;  // OnException ended the operation
          if (ec == net::error::eof) {
            if (!self->parser_->got_some()) return self->CompleteStep(http::error::end_of_stream);
            // A body that ends with the connection (RFC 9112, 6.3) is done; anything else
            // is partial_message. Either way there is nothing more to parse.
            ec = {};
            self->parser_->put_eof(ec);
            if (!ec) self->ReleaseIdleBuffers();
            return self->CompleteStep(ec);
          }
          if (ec) return self->CompleteStep(ec);
          self->ParseBuffered(/*after_read=*/true);
        });
      });
}

void Connection::ReleaseIdleBuffers() {
  read_size_.Reset();
  if (buffer_.size() == 0) buffer_.shrink_to_fit();
  stream_.ReleaseIdleBuffers();
}

void Connection::CompleteStep(beast::error_code ec) {
  // None when OnException ended the operation while a completion was on its way.
  if (auto done = std::exchange(step_done_, nullptr)) done(ec);
}

std::optional<UpstreamLimit> Connection::ExceededLimit() const {
  if (!parser_->is_header_done() || !parser_->chunked()) return std::nullopt;
  // Waiting in a chunked body, the parser holds an unended chunk line, or a last chunk
  // whose trailers have not ended. The CRLF after the previous chunk's data comes first.
  const auto bytes = buffer_.data();
  absl::string_view data(static_cast<const char*>(bytes.data()), bytes.size());
  if (absl::StartsWith(data, "\r\n")) data.remove_prefix(2);
  const size_t eol = data.find("\r\n");
  if (eol == absl::string_view::npos) {
    if (data.size() > limits_.max_chunk_line_bytes) return UpstreamLimit::kChunkLine;
    return std::nullopt;
  }
  if (eol > limits_.max_chunk_line_bytes) return UpstreamLimit::kChunkLine;
  if (data.size() - eol - 2 > limits_.max_header_bytes) return UpstreamLimit::kTrailers;
  return std::nullopt;
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

void Connection::CutReadShortAfter(absl::Duration limit) {
  net::dispatch(stream_.get_executor(), [self = shared_from_this(), limit] {
    if (!self->read_done_) return;  // the read is over
    self->read_cutoff_.expires_after(absl::ToChronoNanoseconds(limit));
    self->read_cutoff_.async_wait([self](beast::error_code ec) {
      if (!ec && self->read_done_) self->CloseOnStrand();  // the read fails, aborted
    });
  });
}

UnreadBody Connection::unread_body() const {
  return UnreadBodyOf(*parser_, request_keep_alive_);
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

std::optional<CloseReason> Connection::ReuseVerdict() const {
  if (closing_) return CloseReason::kCancelled;
  if (broken_ || !parser_) return CloseReason::kError;
  if (!parser_->is_done()) return CloseReason::kUnreadBody;
  // Bytes past the end of the response (a Content-Length shorter than what was sent):
  // the next response on this connection could not be told from them.
  if (buffer_.size() > 0) return CloseReason::kError;
  if (!request_keep_alive_ || !parser_->keep_alive()) return CloseReason::kConnectionClose;
  return std::nullopt;
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
