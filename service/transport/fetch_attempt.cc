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
#include "service/transport/http2/stream.h"
#include "service/transport/pool/connection.h"
#include "service/transport/resilience/retry_budget.h"

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
        done_(std::move(done)) {}

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
      if (connection_) connection_->Close();  // the pending I/O fails and reports back
      if (stream_) stream_->Reset();  // HTTP/2: the stream alone; the connection is shared
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
        self->Release(self->lease_, CloseReason::kCancelled);
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
      if (!connection_ && !finished_) wait_id_ = wait_id;
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
      // A shared HTTP/2 connection is never closed for one request: its stream is.
      if (!lease->multiplexed) connection_ = lease->connection;
      cancelled = cancelled_;
    }
    lease_ = *std::move(lease);
    if (cancelled) {
      GiveBack(CloseReason::kCancelled);
      return Finish(absl::CancelledError("the caller cancelled the request"));
    }
    if (lease_.reused && !lease_.connection->StillOpenAndQuiet()) {
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
    if (lease_.reused) {
      AddressCheck check = CheckPooled(*lease_.connection);
      const PolicyVerdict verdict = check.verdict;
      RecordDecision(std::move(check));
      if (verdict.denied) {
        context_.observer.OnPolicyDenied(request_.origin, *verdict.denied);
        GiveBack(CloseReason::kPolicy);
        return Finish(PolicyDenial(request_.origin, verdict, request_.caller));
      }
      if (lease_.check_first) return CheckIdleSession();
      return Send();
    }
    // Taken first: a drained connection that comes back at once replaces lease_.
    const std::shared_ptr<Connection> dialing = lease_.connection;
    if (lease_.may_race) AwaitDrained();
    dialing->Dial(settings_, deadline_, context_.resolver, request_.caller,
                  [self = shared_from_this(), dialing](absl::Status status) {
                    self->OnDial(dialing, std::move(status));
                  });
  }

  // Lets go of the lease before sending: a connection of its own is retired for
  // `reason`; a stream on a shared HTTP/2 connection is given back (the connection goes
  // on carrying the others, and retires when they end if it must).
  void GiveBack(CloseReason reason) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      connection_ = nullptr;
    }
    Release(lease_, reason);
  }

  // A lease not used after all: a connection of its own is retired for `reason`, a
  // stream on a shared one given back.
  void Release(const ConnectionPool::Lease& lease, CloseReason reason) {
    if (lease.multiplexed) return context_.pool.ReturnStream(lease.connection);
    context_.pool.Retire(lease.connection, reason);
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
    lease_.connection->session()->Ping(
        std::min(settings_.http2.ping_timeout, left),
        [self = shared_from_this(), cut_short](absl::Status status) {
          bool waited;  // the fetch was still waiting for the answer (no cancel)
          {
            std::lock_guard<std::mutex> lock(self->mu_);
            waited = std::exchange(self->pinging_, false);
          }
          const bool inconclusive = cut_short && absl::IsDeadlineExceeded(status);
          self->context_.pool.Checked(self->lease_.connection, status.ok() || inconclusive);
          if (!waited) return;
          if (status.ok()) return self->Send();
          self->Release(self->lease_, CloseReason::kStale);  // a stream lease: given back
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
      return Release(*drained, CloseReason::kStale);
    }
    AddressCheck check = CheckPooled(*drained->connection);
    if (check.verdict.denied) {  // the dial, checked itself, carries on
      return Release(*drained, CloseReason::kPolicy);
    }
    bool take;
    {
      std::lock_guard<std::mutex> lock(mu_);
      take = race_ == Race::kOn && !cancelled_;
      race_wait_id_ = 0;
      if (take) {
        race_ = Race::kDrainedWon;
        if (!drained->multiplexed) connection_ = drained->connection;
      }
    }
    if (!take) {
      if (drained->multiplexed) return context_.pool.ReturnStream(drained->connection);
      context_.pool.Return(drained->connection);
      return;
    }
    const std::optional<DrainAwareChoice> choice = lease_.drain_choice;
    lease_ = *std::move(drained);
    lease_.drain_choice = choice;
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
      surplus = race_ == Race::kDrainedWon;
      if (race_ == Race::kOn) race_ = Race::kDialWon;
      race_wait_id = std::exchange(race_wait_id_, 0);
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
    if (connection->protocol() == Connection::Protocol::kHttp2) {
      std::lock_guard<std::mutex> lock(mu_);
      connection_ = nullptr;  // shared from now on: a cancel resets the stream
      lease_.multiplexed = true;
    }
    context_.pool.Dialed(connection);
    Send();
  }

  void Send() {
    if (lease_.drain_choice) {
      context_.observer.OnDrainAwareAcquisition(request_.origin, *lease_.drain_choice,
                                                   lease_.reused);
    }
    // A stream's lease knows whether it is its connection's first (others may open
    // theirs on a new HTTP/2 connection before the request that dialed it does).
    context_.observer.OnUpstreamRequest(
        request_.origin, lease_.multiplexed ? lease_.reused : lease_.connection->requests() > 0);
    send_start_ = absl::Now();
    if (lease_.multiplexed) return SendStream();
    const TransportSettings& settings = settings_;
    lease_.connection->Send(
        request_, settings.response_header_timeout,
        ResponseLimits{settings.max_response_header_bytes, settings.max_chunk_line_bytes,
                       settings.max_interim_responses},
        deadline_,
        [self = shared_from_this()](absl::StatusOr<ResponseHead> head, bool response_started) {
          self->OnHead(std::move(head), response_started);
        });
  }

  // HTTP/2: the request on a stream of its own; the head comes to OnStreamHead.
  void SendStream() {
    context_.observer.OnStreamOpened(request_.origin);
    bool cancelled;
    {
      // Under the lock: the head (which Deliver takes the stream with) may come on the
      // session's thread before OpenStream has returned here; it waits for the lock.
      // OpenStream runs no callback inside the call.
      std::lock_guard<std::mutex> lock(mu_);
      stream_ = lease_.connection->OpenStream(
          request_, deadline_, [self = shared_from_this()](absl::StatusOr<ResponseHead> head) {
            self->OnStreamHead(std::move(head));
          });
      cancelled = cancelled_;
      if (cancelled) stream_->Reset();  // a cancel that came before the stream was there
    }
  }

  void OnStreamHead(absl::StatusOr<ResponseHead> head) {
    if (head.ok()) return Deliver(*std::move(head));
    bool cancelled;
    {
      std::lock_guard<std::mutex> lock(mu_);
      cancelled = cancelled_;
      stream_ = nullptr;
    }
    context_.observer.OnStreamClosed(request_.origin);
    context_.pool.ReturnStream(lease_.connection);
    if (cancelled) return Finish(absl::CancelledError("the caller cancelled the request"));
    if (http2::WasNotProcessed(head.status())) return SendAgainUnprocessed(head.status());
    // A reused connection that failed before any response (the server closed it while
    // idle): an idempotent request goes again, once, on a fresh connection, as on HTTP/1.1.
    if (lease_.reused && absl::IsUnavailable(head.status()) && !retried_ &&
        request_.IsIdempotent()) {
      retried_ = true;
      context_.observer.OnRetry(request_.origin, RetryReason::kStale);
      return Acquire(/*fresh=*/true);
    }
    Finish(head.status());
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
      connection_ = nullptr;
    }
    // The server closed the pooled connection while it idled: the request never reached
    // it, so an idempotent one may go again, once, on a fresh connection.
    const bool stale = lease_.reused && !response_started && !cancelled &&
                       absl::IsUnavailable(head.status());
    context_.pool.Retire(lease_.connection,
                            stale       ? CloseReason::kStale
                            : cancelled ? CloseReason::kCancelled
                                        : CloseReason::kError);
    if (stale && !retried_ && request_.IsIdempotent()) {
      retried_ = true;
      context_.observer.OnRetry(request_.origin, RetryReason::kStale);
      return Acquire(/*fresh=*/true);
    }
    if (cancelled) return Finish(absl::CancelledError("the caller cancelled the request"));
    if (stale && !request_.IsIdempotent()) {
      return Finish(absl::UnavailableError(absl::StrCat(
          head.status().message(), "; the pooled connection had been closed by the server ",
          "while idle, and a ", request_.method,
          " request is not idempotent, so it was not sent again")));
    }
    Finish(head.status());
  }

  void Deliver(ResponseHead head) {
    bool cancelled;
    std::shared_ptr<http2::Stream> stream;
    {
      // From here Cancel has no effect. One that came first closed the connection (or
      // reset the stream) under the head: nothing is delivered, and the connection
      // never reaches the pool (a shared one carries on).
      std::lock_guard<std::mutex> lock(mu_);
      cancelled = cancelled_;
      finished_ = true;
      connection_ = nullptr;
      stream = std::exchange(stream_, nullptr);
    }
    if (cancelled) {
      if (stream) {
        context_.observer.OnStreamClosed(request_.origin);
        context_.pool.ReturnStream(lease_.connection);
      } else {
        context_.pool.Retire(lease_.connection, CloseReason::kCancelled);
      }
      return Finish(absl::CancelledError("the caller cancelled the request"));
    }
    Response response;
    response.head = std::move(head);
    ConnectionDetails& details = response.connection;
    const auto& connection = lease_.connection;
    details.connection_id = connection->id();
    details.reused = lease_.multiplexed ? lease_.reused : connection->requests() > 1;
    details.was_idle = lease_.reused;
    details.idle_time = lease_.idle_for;
    details.remote_address = connection->remote_address();
    details.protocol = std::string(connection->protocol_name());
    if (!lease_.reused) details.dial = connection->dial_timing();
    details.time_to_first_byte = absl::Now() - send_start_;
    details.retried = retried_;
    response.would_deny_rules = would_deny_rules_;
    response.policy_rule = policy_rule_;
    response.body = std::make_unique<ResponseBody>(connection, std::move(stream), deadline_,
                                                   context_.settler);
    Finish(std::move(response));
  }

  void Finish(absl::StatusOr<Response> result) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      finished_ = true;
      connection_ = nullptr;
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
  ConnectionPool::Lease lease_;
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
  std::shared_ptr<Connection> connection_ ABSL_GUARDED_BY(mu_);  // while I/O may be pending
  std::shared_ptr<http2::Stream> stream_ ABSL_GUARDED_BY(mu_);   // HTTP/2, until the head
  bool pinging_ ABSL_GUARDED_BY(mu_) = false;  // CheckIdleSession waits for the answer
  bool resend_waiting_ ABSL_GUARDED_BY(mu_) = false;  // SendAgainUnprocessed's backoff
  ConnectionPool::WaitId wait_id_ ABSL_GUARDED_BY(mu_) = 0;      // while queued in the pool
  // A dial racing a drain (Lease::may_race): the first to finish carries the request.
  enum class Race { kOn, kDialWon, kDrainedWon };
  Race race_ ABSL_GUARDED_BY(mu_) = Race::kOn;
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
