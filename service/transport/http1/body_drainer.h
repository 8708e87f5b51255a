#ifndef EGRESS_SERVICE_TRANSPORT_HTTP1_BODY_DRAINER_H_
#define EGRESS_SERVICE_TRANSPORT_HTTP1_BODY_DRAINER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "absl/time/time.h"
#include "boost/beast/core/error.hpp"
#include "service/transport/drain/drain_budget.h"
#include "service/transport/drain/drain_decision.h"
#include "service/transport/observer.h"

namespace egress::transport {

struct DrainOutcome {
  std::optional<DrainAbandonReason> abandoned;  // none: the body ended within the caps
  uint64_t bytes = 0;
  absl::Duration duration;
};

// The auto-drain loop of an HTTP/1.1 response: reads and discards the rest of a body
// until it ends, or gives up at the first cap it reaches (bytes, time, a pause longer
// than a dial, the global drain budget) or at an error. It decides; the reading is its
// Source's. One drain at a time; all of it on the connection's loop except progress().
class BodyDrainer {
 public:
  using ReadDone = std::function<void(boost::beast::error_code ec, size_t bytes)>;
  using DoneCallback = std::function<void(const DrainOutcome&)>;
  using Clock = std::function<absl::Time()>;

  // Where the body comes from: the connection's parser over its socket, or a test's script.
  class Source {
   public:
    virtual ~Source() = default;
    virtual bool BodyEnded() const = 0;
    // What is left of a body of known length; none when it is not known.
    virtual std::optional<uint64_t> KnownBytesLeft() const = 0;
    // Reads up to `size` body bytes into `buffer`, waiting at most `pause` for them and
    // never past `deadline` (then ec is beast::error::timeout); `done` gets the bytes read.
    virtual void ReadSome(char* buffer, size_t size, absl::Duration pause, absl::Time deadline,
                          ReadDone done) = 0;
  };

  explicit BodyDrainer(Source& source, Clock now = [] { return absl::Now(); })
      : source_(source), now_(std::move(now)) {}

  // For progress() before the drain starts on the loop: when it started and what is left.
  void Announce(absl::Time start, std::optional<uint64_t> bytes_left);

  // Drains within `caps`, reading at most `buffer_bytes` at a time. A budgeted drain
  // holds `reserved` bytes of `budget` already, reserves more before it reads past them,
  // and releases all of it when it ends. `done` runs once, with the outcome.
  void Start(const Drain& caps, DrainBudget* budget, uint64_t reserved, absl::Time start,
             size_t buffer_bytes, DoneCallback done);

  // Whether a drain is under way.
  bool active() const { return done_ != nullptr; }
  // Ends the drain under way now, abandoned for `reason` (the connection failed).
  void Abort(DrainAbandonReason reason);
  // Forgets the drain under way without running its callback (no handler runs again).
  void Drop() { done_ = nullptr; }

  // How far the drain has come; from any thread.
  DrainProgress progress() const;

 private:
  void Step();
  void OnRead(boost::beast::error_code ec, size_t bytes);
  void Finish();

  Source& source_;
  const Clock now_;
  Drain caps_{};
  DrainBudget* budget_ = nullptr;
  uint64_t reserved_ = 0;
  DrainOutcome outcome_;
  absl::Time start_;
  absl::Time deadline_;
  std::vector<char> scratch_;
  DoneCallback done_;
  // The progress for other threads: start (Unix ns) and the known rest, if any.
  static constexpr uint64_t kLengthUnknown = ~uint64_t{0};
  std::atomic<int64_t> start_ns_{0};
  std::atomic<uint64_t> remaining_{kLengthUnknown};
};

}  // namespace egress::transport

#endif  // EGRESS_SERVICE_TRANSPORT_HTTP1_BODY_DRAINER_H_
