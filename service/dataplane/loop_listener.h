#ifndef EGRESS_SERVICE_DATAPLANE_LOOP_LISTENER_H_
#define EGRESS_SERVICE_DATAPLANE_LOOP_LISTENER_H_

// The data plane's listening port, accepted on every event loop: each loop has a socket
// of its own bound to the port (SO_REUSEPORT), so the kernel spreads connections over the
// loops and a connection is served by the loop that accepted it, with no hand-off.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/steady_timer.hpp"
#include "service/transport/io/event_loops.h"

namespace egress::dataplane {

class LoopListener {
 public:
  using OnAccept = std::function<void(boost::asio::ip::tcp::socket)>;
  using OnAcceptError = std::function<void()>;

  // Listens on `address` ("host:port", an IP address; port 0 picks a free one) on every
  // loop; `on_accept` gets each connection on the loop that accepted it, `on_error` hears
  // of each accept that failed (descriptors exhausted, say; retried after a pause).
  // UNAVAILABLE when the address cannot be bound, INVALID_ARGUMENT when it is not
  // host:port.
  static absl::StatusOr<std::unique_ptr<LoopListener>> Start(transport::EventLoops& loops,
                                                             const std::string& address,
                                                             OnAccept on_accept,
                                                             OnAcceptError on_error);

  int port() const { return port_; }
  // Closes every listening socket, each on its loop, and returns once they are closed
  // and let go of: nothing more is accepted. The loops must be running; the listener
  // holds nothing of theirs afterwards.
  void Stop();

 private:
  // Shared with its pending accept and retry: the last to go frees it, on its loop.
  struct Acceptor {
    explicit Acceptor(boost::asio::io_context& loop) : socket(loop), retry(loop) {}
    boost::asio::ip::tcp::acceptor socket;
    boost::asio::steady_timer retry;
  };
  LoopListener(OnAccept on_accept, OnAcceptError on_error)
      : on_accept_(std::move(on_accept)), on_error_(std::move(on_error)) {}
  void Accept(const std::shared_ptr<Acceptor>& acceptor);

  const OnAccept on_accept_;
  const OnAcceptError on_error_;
  std::vector<std::shared_ptr<Acceptor>> acceptors_;  // one per loop, until Stop
  int port_ = 0;
};

}  // namespace egress::dataplane

#endif  // EGRESS_SERVICE_DATAPLANE_LOOP_LISTENER_H_
