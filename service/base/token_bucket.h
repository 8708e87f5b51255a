#ifndef EGRESS_SERVICE_BASE_TOKEN_BUCKET_H_
#define EGRESS_SERVICE_BASE_TOKEN_BUCKET_H_

#include <algorithm>

#include "absl/time/time.h"

namespace egress::transport {

// Tokens that come back at `rate` a second, up to `burst`: the rate limits of quotas,
// retry budgets and the access log, which pass their rate and burst at each use (a new
// config's apply from the next one). A new bucket is full. Not thread-safe.
class TokenBucket {
 public:
  // The tokens there would be at `now`; a clock that stepped back refills nothing.
  double TokensAt(absl::Time now, double rate, double burst) const {
    if (refilled_ == absl::InfinitePast()) return burst;
    const double elapsed = std::max(0.0, absl::ToDoubleSeconds(now - refilled_));
    return std::min(burst, tokens_ + elapsed * rate);
  }
  void Refill(absl::Time now, double rate, double burst) {
    tokens_ = TokensAt(now, rate, burst);
    refilled_ = std::max(refilled_, now);
  }
  double tokens() const { return tokens_; }
  // Takes a token if there is a whole one (call Refill first).
  bool TryTake() {
    if (tokens_ < 1) return false;
    tokens_ -= 1;
    return true;
  }

 private:
  double tokens_ = 0;
  absl::Time refilled_ = absl::InfinitePast();
};

}  // namespace egress::transport

#endif  // EGRESS_SERVICE_BASE_TOKEN_BUCKET_H_
