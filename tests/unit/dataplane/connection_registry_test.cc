// The data plane's open connections at shutdown (ConnectionRegistry), over a loopback
// socket pair: a connection that starts after CloseAll began (its TLS handshake finished
// meanwhile) is closed at once, not left to outlive the loops.
#include "service/dataplane/connection_registry.h"

#include <array>
#include <chrono>
#include <memory>

#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "gtest/gtest.h"
#include "tests/support/counting_observer.h"

namespace egress::dataplane {
namespace {

namespace net = boost::asio;

class NoMethods : public Methods {
 public:
  bool Serves(absl::string_view) const override { return false; }
  void Start(const std::shared_ptr<ServerSession>&, IncomingCall) override {}
};

TEST(ConnectionRegistryTest, AConnectionThatStartsAfterCloseAllBeganIsClosedAtOnce) {
  net::io_context loop;
  net::ip::tcp::acceptor acceptor(loop, {net::ip::address_v4::loopback(), 0});
  net::ip::tcp::socket caller(loop);
  caller.connect(acceptor.local_endpoint());
  net::ip::tcp::socket accepted = acceptor.accept();

  ConnectionRegistry registry;
  registry.CloseAll(absl::ZeroDuration());  // nothing open yet
  testing::CountingObserver observer;
  NoMethods methods;
  auto session =
      std::make_shared<ServerSession>(std::move(accepted), methods, SessionLimits(), observer);
  session->Start();
  registry.Add(session);
  session.reset();

  // The caller reads the server's SETTINGS, then the end of the connection.
  std::array<char, 4096> bytes;
  boost::system::error_code read_error;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!read_error && std::chrono::steady_clock::now() < give_up) {
    bool read = false;
    caller.async_read_some(net::buffer(bytes), [&](boost::system::error_code ec, size_t) {
      read_error = ec;
      read = true;
    });
    loop.restart();  // it stops whenever it runs out of work
    while (!read && std::chrono::steady_clock::now() < give_up) {
      loop.run_one_for(std::chrono::milliseconds(100));
    }
  }
  EXPECT_EQ(read_error, net::error::eof) << read_error.message();
  EXPECT_EQ(registry.open(), 0u);
}

}  // namespace
}  // namespace egress::dataplane
