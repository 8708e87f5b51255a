#include "tests/support/http2_client.h"

#include <openssl/ssl.h>

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "boost/asio/post.hpp"
#include "service/transport/http/request.h"
#include "service/transport/io/upstream_stream.h"
#include "service/transport/tls/alpn.h"
#include "service/transport/tls/client_context.h"

namespace egress::testing {

namespace net = boost::asio;
using transport::http2::Session;
using transport::http2::Stream;

struct Http2Client::Connection {
  Connection(net::io_context::executor_type executor, net::ssl::context& tls, bool use_tls)
      : stream(executor, tls, use_tls) {}
  transport::UpstreamStream stream;
};

absl::StatusOr<std::unique_ptr<Http2Client>> Http2Client::Connect(
    int port, const Options& options, transport::TransportObserver& observer) {
  std::unique_ptr<Http2Client> client(new Http2Client());
  client->options_ = options;
  client->port_ = port;
  auto tls_context = transport::MakeClientTlsContext({options.ca_file, "", ""});
  if (!tls_context.ok()) return tls_context.status();
  client->tls_context_ = *std::move(tls_context);
  client->thread_ = std::thread([io = &client->io_] { io->run(); });
  client->connection_ = std::make_shared<Connection>(client->io_.get_executor(),
                                                     *client->tls_context_, options.tls);

  transport::UpstreamStream& stream = client->connection_->stream;
  boost::system::error_code ec;
  stream.tcp().socket().connect(
      net::ip::tcp::endpoint(net::ip::address_v4::loopback(), static_cast<uint16_t>(port)), ec);
  if (ec) return absl::UnavailableError(absl::StrCat("connect: ", ec.message()));
  stream.tcp().socket().set_option(net::ip::tcp::no_delay(true), ec);
  if (options.tls) {
    SSL* ssl = stream.tls().native_handle();
    SSL_set_tlsext_host_name(ssl, options.host.c_str());
    SSL_set1_host(ssl, options.host.c_str());
    if (!transport::http2::OfferHttp2(ssl)) return absl::InternalError("SSL_set_alpn_protos");
    std::promise<boost::system::error_code> handshake;
    net::post(client->io_, [&] {
      stream.tls().async_handshake([&](boost::system::error_code e) { handshake.set_value(e); });
    });
    if (const auto e = handshake.get_future().get()) {
      return absl::UnavailableError(absl::StrCat("TLS handshake: ", e.message()));
    }
    client->alpn_ = transport::http2::NegotiatedProtocol(ssl);
    if (client->alpn_ != transport::http2::kHttp2Protocol) return client;
  }

  transport::Origin origin{options.tls, options.host, static_cast<uint16_t>(port)};
  Session::Events events;
  Http2Client* self = client.get();
  events.stream_closed = [self] { ++self->stream_closed_events_; };
  events.unusable = [self](const absl::Status& why) {
    std::lock_guard<std::mutex> lock(self->mu_);
    self->unusable_status_ = why;
    ++self->unusable_events_;
  };
  client->session_ = std::make_shared<Session>(stream, client->connection_, origin,
                                               options.limits, observer, std::move(events));
  client->session_->Start();
  return client;
}

Http2Client::~Http2Client() {
  if (session_) session_->Close();
  session_.reset();
  connection_.reset();
  work_.reset();
  // Once closed, nothing of the session waits: the loop runs out of work.
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (!io_.stopped() && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(1));
  StopLoop();
}

void Http2Client::StopLoop() {
  io_.stop();
  if (thread_.joinable()) thread_.join();
}

absl::Status Http2Client::unusable_status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return unusable_status_;
}

std::string Http2Client::Url(const std::string& path) const {
  return absl::StrCat(options_.tls ? "https://" : "http://", options_.host, ":", port_, path);
}

Http2Client::Exchange Http2Client::Open(const std::string& method, const std::string& path,
                                        std::string body, absl::Time deadline,
                                        transport::HeaderList headers) {
  auto promise = std::make_shared<std::promise<absl::StatusOr<transport::ResponseHead>>>();
  Exchange exchange;
  exchange.head = promise->get_future();
  auto request = transport::MakeRequest(method, Url(path), std::move(headers), std::move(body));
  if (!request.ok()) {
    promise->set_value(request.status());
    return exchange;
  }
  exchange.stream = session_->Open(*request, deadline,
                                   [promise](absl::StatusOr<transport::ResponseHead> head) {
                                     promise->set_value(std::move(head));
                                   });
  return exchange;
}

absl::StatusOr<std::string> Http2Client::Read(Stream& stream, size_t max_bytes,
                                              absl::Time deadline) {
  std::promise<absl::StatusOr<std::string>> promise;
  stream.Read(max_bytes, deadline,
              [&](absl::StatusOr<std::string> bytes) { promise.set_value(std::move(bytes)); });
  return promise.get_future().get();
}

absl::StatusOr<std::string> Http2Client::ReadAll(Stream& stream, size_t piece,
                                                 absl::Time deadline) {
  std::string body;
  for (;;) {
    absl::StatusOr<std::string> bytes = Read(stream, piece, deadline);
    if (!bytes.ok()) return bytes.status();
    if (bytes->empty()) return body;
    body += *bytes;
  }
}

absl::StatusOr<std::string> Http2Client::Get(const std::string& path, absl::Time deadline) {
  Exchange exchange = Open("GET", path, "", deadline);
  absl::StatusOr<transport::ResponseHead> head = exchange.head.get();
  if (!head.ok()) return head.status();
  return ReadAll(*exchange.stream, 64 * 1024, deadline);
}

absl::Status Http2Client::Ping(absl::Duration timeout) {
  std::promise<absl::Status> promise;
  session_->Ping(timeout, [&](absl::Status status) { promise.set_value(std::move(status)); });
  return promise.get_future().get();
}

void Http2Client::OnLoop(const std::function<void()>& step) {
  std::promise<void> done;
  net::post(io_, [&] {
    step();
    done.set_value();
  });
  done.get_future().get();
}

}  // namespace egress::testing
