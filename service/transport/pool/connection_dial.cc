// Connection's dial: resolve -> check the addresses against the policy -> connect race
// -> TLS handshake -> ALPN (to become dial/Dialer, issue 36).
#include "service/transport/pool/connection.h"

#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "boost/asio/dispatch.hpp"
#include "service/base/error_reason.h"
#include "service/base/host_port.h"
#include "service/transport/io/socket_errors.h"
#include "service/transport/policy/address_policy.h"
#include "service/transport/tls/alpn.h"
#include "service/transport/tls/client_context.h"

namespace egress::transport {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

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
  // Written once: every response reports it.
  remote_address_ = HostPort(AddressText(endpoint.address()), endpoint.port());
  stream_.tcp().socket().set_option(tcp::no_delay(true), ec);
  if (!stream_.use_tls()) {
    stream_.tcp().expires_never();
    return OnDialed(/*http2=*/dial_settings_.http2.RequiresH2());  // h2c: prior knowledge
  }

  SSL* ssl = stream_.tls().native_handle();
  // SNI is for names only (RFC 6066); the certificate must match the name or the IP.
  if (const std::optional<net::ip::address> ip = HostAddress(origin_.host)) {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), AddressText(*ip).c_str());
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

}  // namespace egress::transport
