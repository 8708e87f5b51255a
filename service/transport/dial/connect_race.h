#ifndef EGRESS_SERVICE_TRANSPORT_DIAL_CONNECT_RACE_H_
#define EGRESS_SERVICE_TRANSPORT_DIAL_CONNECT_RACE_H_

#include <functional>
#include <memory>
#include <vector>

#include "absl/time/time.h"
#include "boost/asio/any_io_executor.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/steady_timer.hpp"
#include "service/transport/observer.h"

namespace egress::transport {

// The order happy eyeballs tries addresses in (RFC 8305 section 4): the families take
// turns, starting with the first address's, each keeping the resolver's order.
std::vector<boost::asio::ip::tcp::endpoint> InterleaveFamilies(
    const std::vector<boost::asio::ip::tcp::endpoint>& endpoints);

// Happy eyeballs (RFC 8305): connects to one of a host's addresses by attempts started
// `delay` apart (the next at once when one fails), in InterleaveFamilies order. The first
// to connect wins; the others are closed. Runs on `executor` (the connection's loop);
// kept alive by its own pending I/O. Each attempt's end is reported to the observer.
class ConnectRace : public std::enable_shared_from_this<ConnectRace> {
 public:
  using Socket =
      boost::asio::basic_stream_socket<boost::asio::ip::tcp, boost::asio::any_io_executor>;
  // The winner, or: the last attempt's error when every one failed,
  // boost::beast::error::timeout when the time ran out, operation_aborted on Cancel.
  using Callback = std::function<void(boost::system::error_code, Socket,
                                      boost::asio::ip::tcp::endpoint)>;

  ConnectRace(boost::asio::any_io_executor executor,
              std::vector<boost::asio::ip::tcp::endpoint> endpoints, absl::Duration delay,
              TransportObserver& observer);

  // Starts the race, which ends within `timeout`; `done` runs once, on the executor.
  // On the executor.
  void Start(absl::Duration timeout, Callback done);
  // Ends the race under way, if any. On the executor.
  void Cancel();

 private:
  struct Attempt {
    explicit Attempt(const boost::asio::any_io_executor& executor) : socket(executor) {}
    Socket socket;
    bool pending = true;
  };

  void StartNext();
  void OnAttempt(size_t index, boost::system::error_code ec);
  // Closes the attempts under way (abandoned) and reports `ec`, with the winner if any.
  void Finish(boost::system::error_code ec, Socket winner, boost::asio::ip::tcp::endpoint endpoint);

  const boost::asio::any_io_executor executor_;
  const std::vector<boost::asio::ip::tcp::endpoint> endpoints_;
  const absl::Duration delay_;
  TransportObserver& observer_;
  std::vector<std::unique_ptr<Attempt>> attempts_;  // started so far, in order
  boost::asio::steady_timer next_timer_;            // the next attempt's start
  boost::asio::steady_timer timeout_timer_;         // the race's end
  boost::system::error_code last_error_;
  Callback done_;  // empty once the race has ended
};

}  // namespace egress::transport

#endif  // EGRESS_SERVICE_TRANSPORT_DIAL_CONNECT_RACE_H_
