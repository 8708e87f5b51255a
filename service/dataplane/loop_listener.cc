#include "service/dataplane/loop_listener.h"

#include <sys/socket.h>

#include <future>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "boost/asio/detail/socket_option.hpp"
#include "boost/asio/post.hpp"

namespace egress::dataplane {
namespace {

namespace net = boost::asio;
using net::ip::tcp;
using ReusePort = net::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>;

// A pause before accepting again after a failed accept (EMFILE keeps failing at once).
constexpr auto kAcceptRetry = std::chrono::milliseconds(100);

absl::StatusOr<tcp::endpoint> Endpoint(const std::string& address) {
  const size_t colon = address.rfind(':');
  int port = -1;
  boost::system::error_code ec;
  net::ip::address ip;
  if (colon != std::string::npos && absl::SimpleAtoi(address.substr(colon + 1), &port) &&
      port >= 0 && port <= 65535) {
    absl::string_view host = absl::string_view(address).substr(0, colon);
    absl::ConsumePrefix(&host, "[");
    absl::ConsumeSuffix(&host, "]");
    ip = net::ip::make_address(std::string(host), ec);
  }
  if (port < 0 || ec) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot listen on \"", address, "\": give an IP address and a port (host:port)"));
  }
  return tcp::endpoint(ip, static_cast<uint16_t>(port));
}

}  // namespace

absl::StatusOr<std::unique_ptr<LoopListener>> LoopListener::Start(transport::EventLoops& loops,
                                                                  const std::string& address,
                                                                  OnAccept on_accept,
                                                                  OnAcceptError on_error) {
  auto endpoint = Endpoint(address);
  if (!endpoint.ok()) return endpoint.status();
  std::unique_ptr<LoopListener> listener(
      new LoopListener(std::move(on_accept), std::move(on_error)));
  for (size_t i = 0; i < loops.size(); ++i) {
    auto acceptor = std::make_shared<Acceptor>(loops.at(i));
    boost::system::error_code ec;
    acceptor->socket.open(endpoint->protocol(), ec);
    if (!ec) acceptor->socket.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) acceptor->socket.set_option(ReusePort(true), ec);
    if (!ec) acceptor->socket.bind(*endpoint, ec);
    if (!ec) acceptor->socket.listen(net::socket_base::max_listen_connections, ec);
    if (ec) {
      return absl::UnavailableError(
          absl::StrCat("cannot listen for gRPC on ", address, ": ", ec.message()));
    }
    // The loops after the first bind the port the first got (port 0 picks one).
    endpoint->port(acceptor->socket.local_endpoint().port());
    listener->acceptors_.push_back(std::move(acceptor));
  }
  listener->port_ = endpoint->port();
  for (auto& acceptor : listener->acceptors_) {
    net::post(acceptor->socket.get_executor(),
              [listener = listener.get(), acceptor] { listener->Accept(acceptor); });
  }
  return listener;
}

void LoopListener::Accept(const std::shared_ptr<Acceptor>& acceptor) {
  acceptor->socket.async_accept(
      [this, acceptor](boost::system::error_code ec, tcp::socket socket) {
        if (!acceptor->socket.is_open()) return;  // Stop
        if (ec) {
          on_error_();
          acceptor->retry.expires_after(kAcceptRetry);
          acceptor->retry.async_wait([this, acceptor](boost::system::error_code wait) {
            if (!wait && acceptor->socket.is_open()) Accept(acceptor);
          });
          return;
        }
        on_accept_(std::move(socket));
        Accept(acceptor);
      });
}

void LoopListener::Stop() {
  std::vector<std::future<void>> closed;
  for (auto& acceptor : acceptors_) {
    if (!acceptor) continue;  // stopped before
    auto done = std::make_shared<std::promise<void>>();
    closed.push_back(done->get_future());
    // Each element is written by its own loop only.
    net::post(acceptor->socket.get_executor(), [&acceptor, done] {
      boost::system::error_code ignored;  // closing a closed socket is harmless
      acceptor->socket.close(ignored);
      acceptor->retry.cancel();
      acceptor.reset();
      done->set_value();
    });
  }
  for (auto& future : closed) future.wait();
}

}  // namespace egress::dataplane
