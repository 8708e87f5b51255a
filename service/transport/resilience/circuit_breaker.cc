#include "service/transport/resilience/circuit_breaker.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "service/base/error_reason.h"

namespace egress::transport {
namespace {

// How long a probe holds the half-open slot: kProbeHold, or open_for if shorter.
absl::Duration ProbeHold(const CircuitBreakerSettings& settings) {
  return std::min(CircuitBreakers::kProbeHold, settings.open_for);
}

}  // namespace

FetchHealth HealthOf(const absl::Status& status, int http_status, bool count_5xx) {
  if (status.ok()) {
    return count_5xx && http_status >= 500 && http_status <= 599 ? FetchHealth::kFailure
                                                                 : FetchHealth::kSuccess;
  }
  const std::optional<ErrorReason> reason = ReasonOf(status);
  if (!reason) return FetchHealth::kNeutral;
  for (const char* failure :
       {"CONNECT_FAILED", "TLS_FAILED", "TLS_CERTIFICATE_INVALID", "UPSTREAM_CLOSED",
        "UPSTREAM_CONNECTION_FAILED", "UPSTREAM_INVALID_RESPONSE", "UPSTREAM_TIMEOUT"}) {
    if (reason->reason == failure) return FetchHealth::kFailure;
  }
  return FetchHealth::kNeutral;
}

CircuitBreakers::CircuitBreakers(TransportObserver& observer, size_t max_tracked)
    : observer_(observer), max_tracked_(max_tracked) {}

CircuitBreakers::Admission CircuitBreakers::Admit(const Origin& origin,
                                                  const CircuitBreakerSettings& settings,
                                                  absl::Time now) {
  if (!settings.enabled()) return {};
  const std::string key = origin.Key();
  std::lock_guard<std::mutex> lock(mu_);
  const Admission go{absl::OkStatus(), generation_};
  const auto it = breakers_.find(key);
  if (it == breakers_.end()) return go;
  Breaker& breaker = it->second;
  if (breaker.state == BreakerState::kClosed) return go;
  if (breaker.state == BreakerState::kOpen && now >= breaker.open_until) {
    breaker.state = BreakerState::kHalfOpen;
    breaker.probe = 0;
    observer_.OnCircuitBreakerStateChanged(origin, BreakerState::kOpen, BreakerState::kHalfOpen);
  }
  // A probe holds the slot for ProbeHold at most, what the others are told to wait: a
  // slow upstream's probe (which waits for its own timeouts) does not keep every other
  // caller out for longer. The new probe decides.
  const absl::Duration hold = ProbeHold(settings);
  if (breaker.state == BreakerState::kHalfOpen &&
      (breaker.probe == 0 || now - breaker.probe_started >= hold)) {
    breaker.probe = ++last_probe_;
    breaker.probe_started = now;
    Index(key, breaker, now + hold);
    return {absl::OkStatus(), generation_, breaker.probe};
  }
  observer_.OnCircuitBreakerRejected(origin);
  const bool open = breaker.state == BreakerState::kOpen;
  const absl::Duration retry_delay =
      open ? breaker.open_until - now : breaker.probe_started + hold - now;
  return {WithReason(
      absl::UnavailableError(absl::StrCat(
          "circuit breaker open for ", key, ": ", breaker.consecutive_failures,
          " fetches in a row failed (the last: ", breaker.last_failure, "); ",
          open ? "its fetches fail at once for another "
               : "a probe fetch is under way, the others fail at once until it succeeds, "
                 "or for at most another ",
          absl::FormatDuration(absl::Ceil(retry_delay, absl::Milliseconds(1))),
          " (transport.circuit_breaker)")),
      "CIRCUIT_OPEN",
      {{"origin", key}, {"state", ToString(breaker.state)}}, retry_delay)};
}

void CircuitBreakers::Record(const Origin& origin, const CircuitBreakerSettings& settings,
                             const Admission& admission, FetchHealth health,
                             absl::string_view failure, absl::Time now) {
  if (!settings.enabled()) return;
  const std::string key = origin.Key();
  std::lock_guard<std::mutex> lock(mu_);
  if (admission.generation != generation_) return;
  auto it = breakers_.find(key);
  if (health != FetchHealth::kFailure && it == breakers_.end()) return;
  Breaker* breaker = it != breakers_.end() ? &it->second : Track(origin, key, now);
  if (!breaker) return;  // no room: this origin goes without a breaker
  if (breaker->state != BreakerState::kClosed) {
    // Only the latest probe decides: fetches admitted before the breaker opened say old
    // news, and so does a probe that another has replaced.
    if (breaker->state != BreakerState::kHalfOpen || admission.probe == 0 ||
        admission.probe != breaker->probe) {
      return;
    }
    breaker->probe = 0;
    if (health == FetchHealth::kNeutral) {  // the next fetch probes instead
      Index(key, *breaker, now);
      return;
    }
    if (health == FetchHealth::kFailure) {
      breaker->last_failure = std::string(failure);
      return Open(origin, *breaker, settings, now);
    }
    observer_.OnCircuitBreakerStateChanged(origin, BreakerState::kHalfOpen,
                                           BreakerState::kClosed);
    Forget(key);
    return;
  }
  switch (health) {
    case FetchHealth::kNeutral: return;
    case FetchHealth::kSuccess: Forget(key); return;
    case FetchHealth::kFailure:
      breaker->last_failure = std::string(failure);
      if (++breaker->consecutive_failures >= settings.consecutive_failures) {
        Open(origin, *breaker, settings, now);
      } else {
        Index(key, *breaker, now);  // the least recently failed makes room first
      }
  }
}

void CircuitBreakers::Open(const Origin& origin, Breaker& breaker,
                           const CircuitBreakerSettings& settings, absl::Time now) {
  const BreakerState from = breaker.state;
  breaker.state = BreakerState::kOpen;
  breaker.open_until = now + settings.open_for;
  breaker.probe = 0;
  Index(origin.Key(), breaker, breaker.open_until);
  observer_.OnCircuitBreakerStateChanged(origin, from, BreakerState::kOpen);
}

CircuitBreakers::Breaker* CircuitBreakers::Track(const Origin& origin, const std::string& key,
                                                 absl::Time now) {
  if (breakers_.size() >= max_tracked_) {
    // Room from the breaker that has held nothing back the longest: closed (failures,
    // not yet open), open with its time up (the next fetch would probe; an origin
    // nobody fetches any more stays open until then), or half-open with no probe
    // holding the slot. One open now, or probing, stays.
    if (evictable_.empty() || evictable_.begin()->first > now) return nullptr;
    const std::string victim_key = evictable_.begin()->second;
    const Breaker& victim = breakers_.at(victim_key);
    if (victim.state != BreakerState::kClosed) {
      observer_.OnCircuitBreakerStateChanged(victim.origin, victim.state, BreakerState::kClosed);
    }
    Forget(victim_key);
  }
  Breaker& breaker = breakers_[key];
  breaker.origin = origin;
  Index(key, breaker, now);
  return &breaker;
}

void CircuitBreakers::Index(const std::string& key, Breaker& breaker, absl::Time at) {
  if (breaker.evictable_at != absl::InfiniteFuture()) {
    evictable_.erase({breaker.evictable_at, key});
  }
  breaker.evictable_at = at;
  if (at != absl::InfiniteFuture()) evictable_.emplace(at, key);
}

void CircuitBreakers::Forget(const std::string& key) {
  const auto it = breakers_.find(key);
  if (it == breakers_.end()) return;
  Index(key, it->second, absl::InfiniteFuture());
  breakers_.erase(it);
}

std::vector<BreakerStats> CircuitBreakers::Stats(absl::Time now) const {
  std::vector<BreakerStats> stats;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [key, breaker] : breakers_) {
    stats.push_back({key, breaker.state, breaker.consecutive_failures,
                     breaker.state == BreakerState::kOpen
                         ? std::max(breaker.open_until - now, absl::ZeroDuration())
                         : absl::ZeroDuration(),
                     breaker.last_failure});
  }
  return stats;
}

void CircuitBreakers::Reset() {
  std::lock_guard<std::mutex> lock(mu_);
  ++generation_;
  for (const auto& [key, breaker] : breakers_) {
    if (breaker.state == BreakerState::kClosed) continue;
    observer_.OnCircuitBreakerStateChanged(breaker.origin, breaker.state, BreakerState::kClosed);
  }
  breakers_.clear();
  evictable_.clear();
}

}  // namespace egress::transport
