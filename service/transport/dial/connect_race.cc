#include "service/transport/dial/connect_race.h"

#include <utility>

#include "boost/beast/core/error.hpp"

namespace egress::transport {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using error_code = boost::system::error_code;

std::vector<tcp::endpoint> InterleaveFamilies(const std::vector<tcp::endpoint>& endpoints) {
  if (endpoints.empty()) return {};
  const bool first_v6 = endpoints.front().address().is_v6();
  std::vector<tcp::endpoint> first, second;
  for (const auto& endpoint : endpoints) {
    (endpoint.address().is_v6() == first_v6 ? first : second).push_back(endpoint);
  }
  std::vector<tcp::endpoint> order;
  order.reserve(endpoints.size());
  for (size_t i = 0; i < first.size() || i < second.size(); ++i) {
    if (i < first.size()) order.push_back(first[i]);
    if (i < second.size()) order.push_back(second[i]);
  }
  return order;
}

ConnectRace::ConnectRace(net::any_io_executor executor, std::vector<tcp::endpoint> endpoints,
                         absl::Duration delay, TransportObserver& observer)
    : executor_(executor),
      endpoints_(InterleaveFamilies(endpoints)),
      delay_(delay),
      observer_(observer),
      next_timer_(executor),
      timeout_timer_(executor) {}

void ConnectRace::Start(absl::Duration timeout, Callback done) {
  done_ = std::move(done);
  if (endpoints_.empty()) return Finish(net::error::host_not_found, Socket(executor_), {});
  timeout_timer_.expires_after(absl::ToChronoNanoseconds(timeout));
  timeout_timer_.async_wait([self = shared_from_this()](error_code ec) {
    if (ec) return;  // the race ended first
    self->Finish(boost::beast::error::timeout, Socket(self->executor_), {});
  });
  StartNext();
}

void ConnectRace::Cancel() { Finish(net::error::operation_aborted, Socket(executor_), {}); }

void ConnectRace::StartNext() {
  const size_t index = attempts_.size();
  if (!done_ || index == endpoints_.size()) return;
  attempts_.push_back(std::make_unique<Attempt>(executor_));
  attempts_[index]->socket.async_connect(
      endpoints_[index],
      [self = shared_from_this(), index](error_code ec) { self->OnAttempt(index, ec); });
  if (index + 1 == endpoints_.size()) return;
  // Setting the timer again cancels a wait from an earlier attempt.
  next_timer_.expires_after(absl::ToChronoNanoseconds(delay_));
  next_timer_.async_wait([self = shared_from_this()](error_code ec) {
    if (ec) return;  // set again, or the race ended
    self->StartNext();
  });
}

void ConnectRace::OnAttempt(size_t index, error_code ec) {
  Attempt& attempt = *attempts_[index];
  if (!attempt.pending) return;  // Finish closed it and counted it
  attempt.pending = false;
  if (ec) {
    observer_.OnConnectAttempt(ConnectAttemptResult::kFailed);
    last_error_ = ec;
    error_code ignored;  // the attempt is over either way
    attempt.socket.close(ignored);
    // The next address need not wait for the delay (RFC 8305 section 5).
    if (attempts_.size() < endpoints_.size()) return StartNext();
    for (const auto& other : attempts_) {
      if (other->pending) return;  // still racing
    }
    return Finish(last_error_, Socket(executor_), {});
  }
  observer_.OnConnectAttempt(ConnectAttemptResult::kConnected);
  Finish({}, std::move(attempt.socket), endpoints_[index]);
}

void ConnectRace::Finish(error_code ec, Socket winner, tcp::endpoint endpoint) {
  if (!done_) return;  // it has ended already
  next_timer_.cancel();
  timeout_timer_.cancel();
  for (const auto& attempt : attempts_) {
    if (!attempt->pending) continue;
    attempt->pending = false;
    observer_.OnConnectAttempt(ConnectAttemptResult::kAbandoned);
    error_code ignored;  // closing is all that is left to do with it
    attempt->socket.close(ignored);
  }
  std::exchange(done_, nullptr)(ec, std::move(winner), endpoint);
}

}  // namespace egress::transport
