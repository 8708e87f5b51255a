#include "service/transport/fetch_attempt.h"

#include <algorithm>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "boost/asio/post.hpp"
#include "boost/asio/steady_timer.hpp"
#include "service/base/error_reason.h"
#include "service/transport/http2/session.h"
#include "service/transport/pool/connection.h"
#include "service/transport/resilience/retry_budget.h"
#include "service/transport/upstream_exchange.h"

namespace egress::transport {
namespace {

namespace net = boost::asio;

// One request from pool acquisition to response head, retrying once on a fresh
// connection when a reused one turns out dead before any response byte (idempotent
// requests only).
class FetchAttempt : public PendingFetch, public std::enable_shared_from_this<FetchAttempt> {
 public:
  FetchAttempt(const FetchAttemptContext& context, std::shared_ptr<const Snapshot> snapshot,
               HttpRequest request, absl::Time deadline, ResponseCallback done)
      : context_(context),
        snapshot_(std::move(snapshot)),
        settings_(snapshot_->SettingsFor(request.origin.host)),
        request_(std::move(request)),
        deadline_(deadline),
        done_(std::move(done)),
        exchange_(context.pool, context.observer) {}

  void Start() {
    // deny_hosts and the caller's rule are about names: decided before any connection is
    // picked and any name looked up, so a name they deny never reaches DNS.
    caller_verdict_ = settings_.policy->CheckName(request_.caller, request_.origin.host);
    if (const std::optional<DenyReason> denied = caller_verdict_.denied) {
      context_.observer.OnPolicyDenied(request_.origin, *denied);
      if (!HostAddress(request_.origin.host)) context_.observer.OnDnsLookupAvoided();
      RecordDecision({});
      return Finish(PolicyDenial(request_.origin, caller_verdict_, request_.caller));
    }
    CircuitBreakers::Admission admission = context_.breakers.Admit(
        request_.origin, settings_.circuit_breaker, absl::Now());
    if (!admission.status.ok()) return Finish(admission.status);
    breaker_admission_ = std::move(admission);
    Acquire(/*fresh=*/false);
  }

  void Cancel() override {
    ConnectionPool::WaitId wait_id = 0, race_wait_id = 0;
    bool was_pinging, resend_waiting;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (cancelled_ || finished_) return;
      cancelled_ = true;
      was_pinging = std::exchange(pinging_, false);  // the PING's answer is not waited for
      // Under the lock: a head that arrives now finds the connection closing (see Deliver).
      exchange_.Abort();
      wait_id = wait_id_;
      race_wait_id = std::exchange(race_wait_id_, 0);
      resend_waiting = resend_waiting_;
    }
    // A backoff under way ends now: its handler sees cancelled_ and ends the fetch.
    if (resend_waiting) {
      net::post(context_.timers, [self = shared_from_this()] {
        if (self->resend_timer_) self->resend_timer_->cancel();
      });
    }
    // A cancelled wait runs the callback, and so the caller's: never inside the caller's
    // own call to Cancel, which may hold the caller's locks.
    for (const ConnectionPool::WaitId id : {wait_id, race_wait_id}) {
      if (id) {
        net::post(context_.timers, [pool = &context_.pool, id] { pool->CancelWait(id); });
      }
    }
    if (was_pinging) {
      net::post(context_.timers, [self = shared_from_this()] {
        self->GiveBack(CloseReason::kCancelled);  // a stream lease: given back
        self->Finish(absl::CancelledError("the caller cancelled the request"));
      });
    }
  }

 private:
  void Acquire(bool fresh) {
    acquire_start_ = absl::Now();
    const ConnectionPool::WaitId wait_id = context_.pool.Acquire(
        request_.origin, fresh, deadline_,
        [self = shared_from_this()](absl::StatusOr<ConnectionPool::Lease> lease) {
          self->OnLease(std::move(lease));
        });
    bool cancelled;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!exchange_.OwnsConnection() && !finished_) wait_id_ = wait_id;
      cancelled = cancelled_;
    }
    if (cancelled && wait_id) context_.pool.CancelWait(wait_id);
  }

  void OnLease(absl::StatusOr<ConnectionPool::Lease> lease) {
    if (!lease.ok()) return Finish(lease.status());
    context_.observer.OnPoolWait(request_.origin, absl::Now() - acquire_start_);
    bool cancelled;
    {
      std::lock_guard<std::mutex> lock(mu_);
      wait_id_ = 0;
      exchange_.Take(*std::move(lease));
      cancelled = cancelled_;
    }
    const ConnectionPool::Lease& leased = exchange_.lease();
    if (cancelled) {
      GiveBack(CloseReason::kCancelled);
      return Finish(absl::CancelledError("the caller cancelled the request"));
    }
    if (leased.reused && !leased.connection->StillOpenAndQuiet()) {
      // Closed by the server while idle (or talking out of turn), or gone away: another,
      // asked for from a loop. The pool answers with an idle connection at once, inside
      // Acquire: called from here, a pool of dead connections (a server that restarted)
      // would be walked one stack frame deeper per connection.
      GiveBack(CloseReason::kStale);
      return net::post(context_.timers, [self = shared_from_this()] {
        bool cancelled;
        {
          std::lock_guard<std::mutex> lock(self->mu_);
          cancelled = self->cancelled_;  // meanwhile: no wait to cancel, nor lease to give
        }
        if (!cancelled) return self->Acquire(/*fresh=*/false);
        self->Finish(absl::CancelledError("the caller cancelled the request"));
      });
    }
    if (leased.reused) {
      AddressCheck check = CheckPooled(*leased.connection);
      const PolicyVerdict verdict = check.verdict;
      RecordDecision(std::move(check));
      if (verdict.denied) {
        context_.observer.OnPolicyDenied(request_.origin, *verdict.denied);
        GiveBack(CloseReason::kPolicy);
        return Finish(PolicyDenial(request_.origin, verdict, request_.caller));
      }
      if (leased.check_first) return CheckIdleSession();
      return Send();
    }
    // Taken first: a drained connection that comes back at once replaces the lease.
    const std::shared_ptr<Connection> dialing = leased.connection;
    {
      // A race of its own: a dial of an earlier one still under way (it lost to a drained
      // connection, on which the request then failed) is surplus from here.
      std::lock_guard<std::mutex> lock(mu_);
      dialing_ = dialing.get();
      race_ = Race::kOn;
    }
    if (leased.may_race) AwaitDrained();
    dialing->Dial(settings_, deadline_, context_.resolver, request_.caller,
                  [self = shared_from_this(), dialing](absl::Status status) {
                    self->OnDial(dialing, std::move(status));
                  });
  }

  // Lets go of the lease before sending (see UpstreamExchange::GiveBack).
  void GiveBack(CloseReason reason) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      exchange_.Detach();
    }
    exchange_.GiveBack(reason);
  }

  // An HTTP/2 connection idle for ping_interval (Lease::check_first) is asked for a PING
  // before it carries the request, and nobody else's stream goes on it meanwhile: one
  // whose server does not answer within ping_timeout (or before the deadline) is retired
  // (its socket may be dead without a word) and the request takes another. A cancel
  // during the PING ends the fetch at once.
  void CheckIdleSession() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      pinging_ = true;
    }
    const absl::Duration left = std::max(deadline_ - absl::Now(), absl::ZeroDuration());
    // Cut short by this fetch's deadline, a PING without an answer says nothing of the
    // connection: it stays for others.
    const bool cut_short = left < settings_.http2.ping_timeout;
    exchange_.lease().connection->session()->Ping(
        std::min(settings_.http2.ping_timeout, left),
        [self = shared_from_this(), cut_short](absl::Status status) {
          bool waited;  // the fetch was still waiting for the answer (no cancel)
          {
            std::lock_guard<std::mutex> lock(self->mu_);
            waited = std::exchange(self->pinging_, false);
          }
          const bool inconclusive = cut_short && absl::IsDeadlineExceeded(status);
          self->context_.pool.Checked(self->exchange_.lease().connection,
                                      status.ok() || inconclusive);
          if (!waited) return;
          if (status.ok()) return self->Send();
          self->GiveBack(CloseReason::kStale);  // a stream lease: given back
          if (absl::Now() >= self->deadline_) {
            return self->Finish(absl::DeadlineExceededError(absl::StrCat(
                "deadline expired while checking an idle HTTP/2 connection to ",
                self->request_.origin.Key())));
          }
          self->Acquire(/*fresh=*/false);
        });
  }

  // Dialing while drains are under way: a drained connection that comes back before the
  // dial is done carries the request instead.
  void AwaitDrained() {
    const ConnectionPool::WaitId id = context_.pool.AwaitReturn(
        request_.origin, deadline_,
        [self = shared_from_this()](absl::StatusOr<ConnectionPool::Lease> drained) {
          self->OnDrainedReturn(std::move(drained));
        });
    std::lock_guard<std::mutex> lock(mu_);
    if (race_ == Race::kOn) race_wait_id_ = id;
  }

  void OnDrainedReturn(absl::StatusOr<ConnectionPool::Lease> drained) {
    if (!drained.ok()) return;  // the dial won (or the deadline passed): the dial carries on
    // An idle HTTP/2 connection comes as a stream lease (not one in need of a check: the
    // dial carries on instead).
    if (!drained->connection->StillOpenAndQuiet() || drained->check_first) {
      return UpstreamExchange::ReleaseUnused(context_.pool, *drained, CloseReason::kStale);
    }
    AddressCheck check = CheckPooled(*drained->connection);
    if (check.verdict.denied) {  // the dial, checked itself, carries on
      return UpstreamExchange::ReleaseUnused(context_.pool, *drained, CloseReason::kPolicy);
    }
    bool take;
    {
      std::lock_guard<std::mutex> lock(mu_);
      take = race_ == Race::kOn && !cancelled_;
      race_wait_id_ = 0;
      if (take) {
        race_ = Race::kDrainedWon;
        drained->drain_choice = exchange_.lease().drain_choice;  // the dial's, kept
        exchange_.Take(*std::move(drained));
      }
    }
    if (!take) return UpstreamExchange::ReturnUnused(context_.pool, *drained);
    RecordDecision(std::move(check));
    Send();
  }

  // What the policy this request started with says of a pooled connection, which may
  // have been dialed under an earlier one: judged by the address it is connected to
  // (the others its host resolved to at the dial are not kept).
  AddressCheck CheckPooled(const Connection& connection) const {
    AddressCheck check;
    if (const std::optional<net::ip::address> address = connection.remote_ip()) {
      check.addresses.push_back(*address);
    }
    check.verdict = settings_.policy->CheckAddresses(request_.origin.host, check.addresses);
    return check;
  }

  // The policy's verdict on this fetch, from its caller's check and its connection's:
  // counted, kept for dry runs, and reported with the response. Once per fetch: a retry
  // on a fresh connection is the same fetch.
  void RecordDecision(AddressCheck check) {
    if (decided_) return;
    decided_ = true;
    PolicyDecision decision{absl::Now(), request_.caller, request_.origin,
                            std::move(check.addresses),
                            AddressPolicy::Combine(caller_verdict_, std::move(check.verdict))};
    for (const std::string& rule : decision.verdict.would_deny) {
      context_.observer.OnPolicyWouldDeny(request_.origin, rule);
    }
    would_deny_rules_ = decision.verdict.would_deny;
    policy_rule_ = decision.verdict.rule;
    context_.policy_history.Add(std::move(decision));
  }

  void OnDial(const std::shared_ptr<Connection>& connection, absl::Status status) {
    bool surplus;
    ConnectionPool::WaitId race_wait_id;
    {
      std::lock_guard<std::mutex> lock(mu_);
      surplus = connection.get() != dialing_ || race_ == Race::kDrainedWon;
      if (!surplus && race_ == Race::kOn) race_ = Race::kDialWon;
      race_wait_id = surplus ? 0 : std::exchange(race_wait_id_, 0);
    }
    if (race_wait_id) context_.pool.CancelWait(race_wait_id);
    // The addresses were checked (the dial got past the lookup): the policy has decided.
    if (!surplus && connection->address_check()) RecordDecision(*connection->address_check());
    if (!status.ok()) {
      context_.pool.Retire(connection, CloseReason::kDialFailed);
      if (surplus) return;
      bool cancelled;
      {
        std::lock_guard<std::mutex> lock(mu_);
        cancelled = cancelled_;
      }
      // Closed under a handshake, the dial fails however the next step saw the socket.
      if (cancelled) return Finish(absl::CancelledError("the caller cancelled the request"));
      // A lookup that failed is the resolver's trouble: the origin was never reached.
      if (!connection->address_check()) origin_unreached_ = true;
      return Finish(std::move(status));
    }
    const DialTiming& timing = connection->dial_timing();
    context_.observer.OnOriginCost(
        request_.origin, context_.pool.RecordDial(
                             request_.origin, timing.dns + timing.connect + timing.tls_handshake));
    if (surplus) {
      // A drained connection carried the request; this one is ready for the next.
      const bool kept = context_.pool.Return(connection);
      return context_.observer.OnSurplusConnection(request_.origin, kept);
    }
    bool cancelled;
    {
      std::lock_guard<std::mutex> lock(mu_);
      cancelled = cancelled_;
    }
    if (cancelled) {  // during the dial: the request is not sent
      context_.pool.Retire(connection, CloseReason::kCancelled);
      return Finish(absl::CancelledError("the caller cancelled the request"));
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      exchange_.Dialed();  // HTTP/2: shared from now on, a cancel resets the stream
    }
    context_.pool.Dialed(connection);
    Send();
  }

  void Send() {
    const ConnectionPool::Lease& lease = exchange_.lease();
    if (lease.drain_choice) {
      context_.observer.OnDrainAwareAcquisition(request_.origin, *lease.drain_choice,
                                                lease.reused);
    }
    context_.observer.OnUpstreamRequest(request_.origin, exchange_.Reused());
    send_start_ = absl::Now();
    exchange_.Send(
        request_, settings_, deadline_, mu_,
        [self = shared_from_this()](absl::StatusOr<ResponseHead> head, bool response_started) {
          self->OnHead(std::move(head), response_started);
        });
  }

  // The server did not process the request (GOAWAY, REFUSED_STREAM, before any head):
  // safe to send again whatever the method (RFC 9113 8.7), on another stream, after a
  // backoff (servers refuse under load, and a GOAWAY every few streams may refuse it
  // again and again), for as long as the deadline allows.
  void SendAgainUnprocessed(const absl::Status& refusal) {
    const absl::Duration wait = RandomBackoff(kResendBackoff, ++refusals_);
    if (absl::Now() + wait >= deadline_) {
      const std::string key = request_.origin.Key();
      return Finish(WithReason(
          absl::DeadlineExceededError(absl::StrCat(
              "deadline expired while sending the request to ", key, " again: it was not "
              "processed ", refusals_, refusals_ == 1 ? " time" : " times", " (the last: ",
              refusal.message(), ")")),
          "DEADLINE_EXCEEDED", {{"origin", key}}));
    }
    retried_ = true;
    context_.observer.OnRetry(request_.origin, RetryReason::kRefusedStream);
    {
      std::lock_guard<std::mutex> lock(mu_);
      resend_waiting_ = true;
    }
    // The timer lives on the first loop, where Cancel cancels it: a Cancel before it is
    // armed is seen here, one after cancels it.
    net::post(context_.timers, [self = shared_from_this(), wait] {
      if (self->EndResendIfCancelled(/*waited=*/false)) return;
      if (!self->resend_timer_) {
        self->resend_timer_ =
            std::make_unique<net::steady_timer>(self->context_.timers);
      }
      self->resend_timer_->expires_after(absl::ToChronoNanoseconds(wait));
      self->resend_timer_->async_wait([self](boost::system::error_code) {
        if (!self->EndResendIfCancelled(/*waited=*/true)) self->Acquire(/*fresh=*/false);
      });
    });
  }

  // Whether the caller cancelled during SendAgainUnprocessed's backoff: then the fetch
  // ends. Once `waited` is over, the backoff is.
  bool EndResendIfCancelled(bool waited) {
    bool cancelled;
    {
      std::lock_guard<std::mutex> lock(mu_);
      cancelled = cancelled_;
      if (waited || cancelled) resend_waiting_ = false;
    }
    if (cancelled) Finish(absl::CancelledError("the caller cancelled the request"));
    return cancelled;
  }

  void OnHead(absl::StatusOr<ResponseHead> head, bool response_started) {
    if (head.ok()) return Deliver(*std::move(head));
    bool cancelled;
    {
      std::lock_guard<std::mutex> lock(mu_);
      cancelled = cancelled_;
      exchange_.Detach();
    }
    const UpstreamExchange::HeadFailure failure =
        exchange_.GiveBackAfterFailedHead(head.status(), response_started, cancelled);
    if (cancelled) return Finish(absl::CancelledError("the caller cancelled the request"));
    if (failure.not_processed) return SendAgainUnprocessed(head.status());
    // The server closed the pooled connection while it idled: the request never reached
    // it, so an idempotent one may go again, once, on a fresh connection.
    if (failure.stale && !retried_ && request_.IsIdempotent()) {
      retried_ = true;
      context_.observer.OnRetry(request_.origin, RetryReason::kStale);
      return Acquire(/*fresh=*/true);
    }
    if (failure.closed_while_idle && !request_.IsIdempotent()) {
      return Finish(absl::UnavailableError(absl::StrCat(
          head.status().message(), "; the pooled connection had been closed by the server ",
          "while idle, and a ", request_.method,
          " request is not idempotent, so it was not sent again")));
    }
    Finish(head.status());
  }

  void Deliver(ResponseHead head) {
    bool cancelled;
    {
      // From here Cancel has no effect. One that came first closed the connection (or
      // reset the stream) under the head: nothing is delivered, and the connection
      // never reaches the pool (a shared one carries on).
      std::lock_guard<std::mutex> lock(mu_);
      cancelled = cancelled_;
      finished_ = true;
      exchange_.Detach();
    }
    if (cancelled) {
      exchange_.GiveBack(CloseReason::kCancelled);
      return Finish(absl::CancelledError("the caller cancelled the request"));
    }
    Response response;
    response.head = std::move(head);
    ConnectionDetails& details = response.connection;
    const ConnectionPool::Lease& lease = exchange_.lease();
    const Connection& connection = *lease.connection;
    details.connection_id = connection.id();
    details.reused = exchange_.Reused();
    details.was_idle = lease.reused;
    details.idle_time = lease.idle_for;
    details.remote_address = connection.remote_address();
    details.protocol = std::string(connection.protocol_name());
    if (!lease.reused) details.dial = connection.dial_timing();
    details.time_to_first_byte = absl::Now() - send_start_;
    details.retried = retried_;
    response.would_deny_rules = would_deny_rules_;
    response.policy_rule = policy_rule_;
    // The body holds the exchange from here (this one is left empty).
    response.body =
        std::make_unique<ResponseBody>(std::move(exchange_), deadline_, context_.settler);
    Finish(std::move(response));
  }

  void Finish(absl::StatusOr<Response> result) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      finished_ = true;
      exchange_.Detach();
    }
    if (breaker_admission_) {
      const absl::Status& status = result.status();
      context_.breakers.Record(
          request_.origin, settings_.circuit_breaker, *breaker_admission_,
          origin_unreached_ ? FetchHealth::kNeutral
                            : HealthOf(status, result.ok() ? result->head.status_code : 0,
                                       settings_.circuit_breaker.count_5xx),
          result.ok() ? absl::StrCat("HTTP ", result->head.status_code) : status.message(),
          absl::Now());
    }
    if (!result.ok()) result = WithWouldDenyRules(result.status(), would_deny_rules_);
    std::exchange(done_, nullptr)(std::move(result));
  }

  const FetchAttemptContext& context_;
  const std::shared_ptr<const Snapshot> snapshot_;  // the config it started with
  const TransportSettings& settings_;                           // ... for its origin
  const HttpRequest request_;
  const absl::Time deadline_;
  ResponseCallback done_;
  absl::Time acquire_start_;
  absl::Time send_start_;
  bool retried_ = false;
  // HTTP/2 streams the server did not process, sent again after a backoff from 2 ms,
  // doubling up to 100 ms (full jitter), until the deadline.
  static constexpr RetrySettings kResendBackoff{/*max_attempts=*/0, absl::Milliseconds(2),
                                                absl::Milliseconds(100)};
  uint32_t refusals_ = 0;
  std::unique_ptr<net::steady_timer> resend_timer_;  // on loops_.first()
  // Set when admitted by the origin's circuit breaker, which is given the fetch's end.
  std::optional<CircuitBreakers::Admission> breaker_admission_;
  bool origin_unreached_ = false;  // the lookup failed: the end says nothing of the origin
  PolicyVerdict caller_verdict_;  // the caller stage, from Start
  bool decided_ = false;          // RecordDecision ran
  std::vector<std::string> would_deny_rules_;
  std::string policy_rule_;  // the rule that let the fetch through

  std::mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  // The lease, and what a cancel aborts (see UpstreamExchange's comment); given to the
  // response body with the head.
  UpstreamExchange exchange_;
  bool pinging_ ABSL_GUARDED_BY(mu_) = false;  // CheckIdleSession waits for the answer
  bool resend_waiting_ ABSL_GUARDED_BY(mu_) = false;  // SendAgainUnprocessed's backoff
  ConnectionPool::WaitId wait_id_ ABSL_GUARDED_BY(mu_) = 0;      // while queued in the pool
  // A dial racing a drain (Lease::may_race): the first to finish carries the request.
  // Each dial of the fetch starts a race; `dialing_` is the latest dial's connection (an
  // identity, never dereferenced), every other dial a surplus one.
  enum class Race { kOn, kDialWon, kDrainedWon };
  Race race_ ABSL_GUARDED_BY(mu_) = Race::kOn;
  const Connection* dialing_ ABSL_GUARDED_BY(mu_) = nullptr;
  ConnectionPool::WaitId race_wait_id_ ABSL_GUARDED_BY(mu_) = 0;  // see AwaitDrained
};

}  // namespace

std::shared_ptr<PendingFetch> StartFetchAttempt(const FetchAttemptContext& context,
                                                std::shared_ptr<const Snapshot> snapshot,
                                                HttpRequest request, absl::Time deadline,
                                                ResponseCallback done) {
  auto attempt = std::make_shared<FetchAttempt>(context, std::move(snapshot), std::move(request),
                                                deadline, std::move(done));
  attempt->Start();
  return attempt;
}

}  // namespace egress::transport
