#include "service/transport/transport.h"

#include <iostream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "service/transport/dns/caching_resolver.h"
#include "service/transport/resilience/retrying_fetch.h"

namespace egress::transport {

absl::StatusOr<std::unique_ptr<Transport>> Transport::Create(TransportSettings settings,
                                                             TransportObserver& observer) {
  auto snapshot = MakeSnapshot(std::move(settings));
  if (!snapshot.ok()) return snapshot.status();
  return std::unique_ptr<Transport>(new Transport(observer, *std::move(snapshot)));
}

std::shared_ptr<const Transport::Snapshot> Transport::Current() const {
  std::lock_guard<std::mutex> lock(mu_);
  return current_;
}

absl::Status Transport::UpdateSettings(TransportSettings settings) {
  if (settings.io_threads != Current()->settings.io_threads) {
    return absl::InvalidArgumentError(
        "transport.io_threads: cannot change while egressd runs; restart it instead");
  }
  auto snapshot = MakeSnapshot(std::move(settings));
  if (!snapshot.ok()) return snapshot.status();
  // Before the limits (whose room may serve queued requests from the idle connections)
  // and before the swap: no request is handed an idle connection the new policy denies.
  pool_.SetPolicy((*snapshot)->settings.policy);
  pool_.SetLimits(PoolLimitsOf((*snapshot)->settings));
  drain_budget_.SetLimit((*snapshot)->settings.drain_budget_bytes);
  policy_history_.SetCapacity((*snapshot)->settings.policy_history_size);
  const bool new_breakers = BreakerSettingsOf(**snapshot) != BreakerSettingsOf(*Current());
  {
    std::lock_guard<std::mutex> lock(mu_);
    current_ = *std::move(snapshot);
  }
  // After the swap: a fetch admitted before the reset, under the old thresholds, is not
  // counted. A config that leaves them as they were keeps every breaker's state.
  if (new_breakers) breakers_.Reset();
  return absl::OkStatus();
}

Transport::Transport(TransportObserver& observer, std::shared_ptr<const Snapshot> snapshot)
    : observer_(observer),
      current_(snapshot),
      resolver_(std::make_unique<CachingResolver>(observer)),
      loops_(snapshot->settings.io_threads ? snapshot->settings.io_threads
                                           : std::thread::hardware_concurrency(),
             [this](const char* what) {
               observer_.OnTransportException();
               std::cerr << "egressd: transport: exception "
                         << (what ? absl::StrCat("in an I/O handler: ", what)
                                  : std::string("of unknown type in an I/O handler"))
                         << "\n";
             }),
      drain_budget_(snapshot->settings.drain_budget_bytes, observer),
      policy_history_(snapshot->settings.policy_history_size),
      breakers_(observer),
      pool_(loops_.first().get_executor(), PoolLimitsOf(snapshot->settings),
            [this](const Origin& origin) { return MakeConnection(origin); },
            [this](std::shared_ptr<Connection> connection) { Warm(std::move(connection)); }),
      // The drain policy in force when a drain starts, not when its request did.
      settler_(pool_, drain_budget_, observer_,
               [this](absl::string_view host) { return Current()->settings.DrainFor(host); }),
      attempt_context_{observer_, pool_, breakers_, policy_history_, *resolver_, loops_.first(),
                       settler_} {
  pool_.SetPolicy(snapshot->settings.policy);
}

Transport::~Transport() {
  const std::vector<std::shared_ptr<Connection>> connections = pool_.Shutdown();
  loops_.Stop();
  // A busy connection holds its operation's callbacks, which own the exchange that owns
  // the connection, and an HTTP/2 one its session, which holds it back: let go of them
  // now that no handler can run (an idle one's close was posted to a loop that stopped).
  for (const auto& connection : connections) connection->Abandon();
}

std::shared_ptr<Connection> Transport::MakeConnection(const Origin& origin) {
  auto connection = std::make_shared<Connection>(loops_.ForNewConnection().get_executor(),
                                                 Current()->TlsFor(origin.host), origin,
                                                 next_connection_id_++, observer_);
  connection->OnSessionEnded([this, weak = std::weak_ptr<Connection>(connection)] {
    if (auto ended = weak.lock()) pool_.SessionEnded(ended);
  });
  return connection;
}

void Transport::LookUp(const std::string& host, size_t max_per_family, absl::Time deadline,
                       std::function<void(Addresses)> done) {
  Resolver::Query query;
  query.host = host;
  query.deadline = deadline;
  query.max_addresses_per_family = max_per_family;
  resolver_->Resolve(std::move(query), Current()->settings.dns, loops_.first().get_executor(),
                     [done = std::move(done)](absl::StatusOr<Resolver::Endpoints> endpoints) {
                       if (!endpoints.ok()) return done(endpoints.status());
                       std::vector<boost::asio::ip::address> addresses;
                       for (const auto& endpoint : *endpoints) {
                         addresses.push_back(endpoint.address());
                       }
                       done(std::move(addresses));
                     });
}

void Transport::Warm(std::shared_ptr<Connection> connection) {
  const Origin& origin = connection->origin();
  const auto snapshot = Current();
  const TransportSettings& settings = snapshot->SettingsFor(origin.host);
  // As any dial: the policy in force checks every address, and the phases their timeouts.
  const absl::Time deadline =
      absl::Now() + settings.connect_timeout + settings.tls_handshake_timeout;
  connection->Dial(settings, deadline, *resolver_, /*caller=*/std::nullopt,
                   [this, connection](absl::Status status) {
                     if (!status.ok()) return pool_.Retire(connection, CloseReason::kDialFailed);
                     const DialTiming& timing = connection->dial_timing();
                     observer_.OnOriginCost(
                         connection->origin(),
                         pool_.RecordDial(connection->origin(),
                                          timing.dns + timing.connect + timing.tls_handshake));
                     pool_.Return(connection);
                   });
}

std::shared_ptr<PendingFetch> Transport::Fetch(HttpRequest request, absl::Time deadline,
                                               ResponseCallback done) {
  std::shared_ptr<const Snapshot> snapshot = Current();
  const RetrySettings& retry = snapshot->SettingsFor(request.origin.host).retry;
  if (request.max_attempts.value_or(retry.max_attempts) <= 1) {
    return StartFetchAttempt(attempt_context_, std::move(snapshot), std::move(request), deadline,
                             std::move(done));
  }
  // Every attempt under the settings the fetch started with.
  auto attempt = [this, snapshot, deadline](HttpRequest request, ResponseCallback done) {
    return StartFetchAttempt(attempt_context_, snapshot, std::move(request), deadline,
                             std::move(done));
  };
  auto fetch = std::make_shared<RetryingFetch>(loops_.first(), observer_, retry_budgets_, retry,
                                               std::move(request), deadline, std::move(attempt),
                                               std::move(done));
  fetch->Start();
  return fetch;
}

}  // namespace egress::transport
