#ifndef EGRESS_SERVICE_DATAPLANE_CALLER_LIMITS_H_
#define EGRESS_SERVICE_DATAPLANE_CALLER_LIMITS_H_

// What a caller's connection to the data plane may do before egressd refuses it (issue
// 37's limits against hostile callers), beside SessionLimits' bounds on each call: how
// many connections, how long before the client preface, how many streams it may reset,
// how many SETTINGS and PING acknowledgements it may leave unread, how long a header
// block may run. Each refusal ends the connection and is counted once, under its own
// CallRefusal (egress_calls_refused_total).

#include <nghttp2/nghttp2.h>

#include <cstddef>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "boost/asio/ip/address.hpp"
#include "service/fetch/fetch_observer.h"

namespace egress::dataplane {

struct CallerLimits {
  // Caller connections open at once over every loop. Past it, a new connection takes the
  // slot of the oldest one that has not sent its client preface (or finished its TLS
  // handshake) within `eviction_age` of its accept (preface_evicted), else of the one that
  // has had no call open for longest, at least `idle_eviction_age` (idle_evicted); that
  // connection is closed. When there is neither, the new one is closed as it is accepted
  // (too_many_connections). egressd's --grpc_max_connections.
  uint32_t max_connections = 4096;
  // How long a connection has to send its preface before a newer one may take its slot
  // when all are taken: a caller's handshake takes a few round trips, and the newest
  // connection evicting the oldest at once would, in a storm of reconnecting callers near
  // the bound, let no handshake finish.
  absl::Duration eviction_age = absl::Seconds(1);
  // How long a connection that sent its preface must have had no call open (a call is
  // open from when its method has it to its stream's close) before a new one may take its
  // slot when all are taken (nginx likewise closes idle keep-alive connections when it
  // runs out): a caller that greets and then holds its connections idle cannot keep the
  // slots either. The connection gets a GOAWAY first: a gRPC client retries a call it had
  // on its way, and connects again at its next one.
  absl::Duration idle_eviction_age = absl::Seconds(10);
  // Of those, the most from one source (an IPv4 address, or an IPv6 /64), so that one
  // host's idle or half-open connections cannot take every slot from the others; past it
  // too_many_connections as well. egressd's --grpc_max_connections_per_source.
  uint32_t max_connections_per_source = 1024;
  // How long a new connection has to send the client preface and its SETTINGS before it
  // is closed (preface_timeout): gRPC's library server's handshake timeout
  // (GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, 120 s).
  absl::Duration preface_timeout = absl::Minutes(2);
  // Streams the caller may reset before their answer is all sent (rapid reset,
  // CVE-2023-44487): a bucket of `reset_burst` refilled at `resets_per_second`; the reset
  // that finds it empty gets GOAWAY ENHANCE_YOUR_CALM (rapid_reset). nghttp2's defaults.
  uint32_t reset_burst = 1000;
  uint32_t resets_per_second = 33;
  // SETTINGS and PING acknowledgements (and RST_STREAMs) queued for a caller that does
  // not read them; past it the connection is closed (settings_flood, ping_flood).
  // nghttp2's default.
  size_t max_queued_acks = 1000;
  // CONTINUATION frames after one HEADERS; past it the connection is closed
  // (continuation_flood). nghttp2's default.
  size_t max_continuations = 8;
  // Entries in one SETTINGS frame; past it GOAWAY ENHANCE_YOUR_CALM (settings_flood).
  size_t max_settings_entries = 32;
};

using OptionPtr = std::unique_ptr<nghttp2_option, void (*)(nghttp2_option*)>;
// nghttp2's options for a server session bounded by `limits`.
OptionPtr ServerOptions(const CallerLimits& limits);

class ConnectionSlot;

// The caller connections open now over every loop, in all and by source, within
// CallerLimits' max_connections and max_connections_per_source. Thread-safe.
//
// When every slot is taken, a new connection may take the slot of one that is doing
// nothing for its caller, which is closed (ConnectionSlot::EvictWith): first the oldest
// that has not sent its client preface within `eviction_age`, else the one idle (no call
// open) for longest, at least `idle_eviction_age`. So callers that connect and send
// nothing, or greet and then hold their connections idle (a flood from a few sources,
// each within its own share), cannot keep the slots from callers that make calls; only
// connections with calls open are never evicted, and those the per-source share bounds.
class ConnectionLedger : public std::enable_shared_from_this<ConnectionLedger> {
 public:
  explicit ConnectionLedger(const CallerLimits& limits) : limits_(limits) {}
  // A slot for a connection from `source`, or an empty one (held() false) past a bound.
  // May call an evicted connection's close, on this thread, before it returns.
  ConnectionSlot Take(const boost::asio::ip::address& source);

 private:
  friend class ConnectionSlot;
  using Close = std::function<void(CallRefusal)>;
  struct Slot {
    std::string source;    // by_source_'s key
    absl::Duration taken;  // when its connection was accepted (SteadyNow)
    Close close;           // set while the slot may be evicted
    // Since when the connection has had no call open (SteadyNow in nanoseconds; 0: a call
    // is open, or no preface yet), written by its loop, read here.
    std::shared_ptr<std::atomic<int64_t>> idle_since;
  };
  using SlotIterator = absl::flat_hash_map<uint64_t, Slot>::iterator;
  void Release(uint64_t id);
  bool EvictWith(uint64_t id, Close close);
  void Proven(uint64_t id);
  // The slot a new connection takes from another when all are taken, and why; none (end)
  // when no connection may be evicted.
  std::pair<SlotIterator, CallRefusal> Victim(absl::Duration now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Gives up a slot: its connection no longer counts.
  void Forget(SlotIterator slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const CallerLimits limits_;
  std::mutex mutex_;
  uint64_t next_id_ ABSL_GUARDED_BY(mutex_) = 0;
  absl::flat_hash_map<uint64_t, Slot> slots_ ABSL_GUARDED_BY(mutex_);  // held, by id
  // Ids of slots with a close, oldest first: without their preface yet, and with it.
  std::set<uint64_t> unproven_ ABSL_GUARDED_BY(mutex_);
  std::set<uint64_t> proven_ ABSL_GUARDED_BY(mutex_);
  // No connection can have been idle for idle_eviction_age before then (SteadyNow): a
  // scan that found none says when one may be, so that a flood of connections at the
  // bound costs a comparison each, not a scan.
  absl::Duration no_idle_victim_before_ ABSL_GUARDED_BY(mutex_);
  // Only sources with a slot held.
  absl::flat_hash_map<std::string, uint32_t> by_source_ ABSL_GUARDED_BY(mutex_);
};

// One caller connection's place in the ledger, held by its session for as long as it
// lives (and by the TLS handshake before).
class ConnectionSlot {
 public:
  ConnectionSlot() = default;
  ConnectionSlot(ConnectionSlot&& other) noexcept
      : ledger_(std::move(other.ledger_)),
        id_(other.id_),
        proven_(other.proven_),
        idle_since_(std::move(other.idle_since_)) {}
  ConnectionSlot& operator=(ConnectionSlot&& other) noexcept;
  ~ConnectionSlot() { Release(); }
  bool held() const { return ledger_ != nullptr; }
  // The ledger may evict the connection for a newer one (see ConnectionLedger): it then
  // calls `close` with the reason to count (on the thread that accepted the newer one, any
  // loop's: `close` posts to this connection's loop) and no longer counts this slot.
  // Replaces an earlier `close`. False when the slot was evicted already: the connection
  // must close now.
  bool EvictWith(std::function<void(CallRefusal)> close);
  // The caller sent its client preface. Once.
  void Proven();
  // Whether the connection has calls open now; after Proven. On the connection's loop.
  void CallsOpen(bool open);

 private:
  friend class ConnectionLedger;
  ConnectionSlot(std::shared_ptr<ConnectionLedger> ledger, uint64_t id,
                 std::shared_ptr<std::atomic<int64_t>> idle_since)
      : ledger_(std::move(ledger)), id_(id), idle_since_(std::move(idle_since)) {}
  void Release();
  std::shared_ptr<ConnectionLedger> ledger_;
  uint64_t id_ = 0;  // the ledger's key for it
  bool proven_ = false;
  std::shared_ptr<std::atomic<int64_t>> idle_since_;  // the ledger's Slot::idle_since
};

// One connection's watch over its caller, for what nghttp2 reports and the resets it
// leaves to the application: decides which CallRefusal ends the connection and counts
// it once. On the session's loop only.
class CallerGuard {
 public:
  CallerGuard(const CallerLimits& limits, FetchObserver& observer)
      : limits_(limits), observer_(observer), reset_tokens_(limits.reset_burst) {}

  // Every frame the caller sends, as nghttp2 begins reading it.
  void OnBeginFrame(const nghttp2_frame_hd& head) { last_frame_type_ = head.type; }
  // The caller reset a stream whose answer is not all sent: false when that overdraws
  // the reset budget (the connection must end with GOAWAY ENHANCE_YOUR_CALM, counted).
  bool TakeReset();
  // nghttp2 found `frame` invalid (`error`, one of nghttp2_error); `open_streams` the
  // caller's streams open now. A request past SETTINGS_MAX_CONCURRENT_STREAMS is
  // counted, refused with REFUSED_STREAM or, once the caller has acknowledged the limit,
  // by ending the connection.
  void OnInvalidFrame(const nghttp2_frame& frame, int error, size_t open_streams,
                      uint32_t max_concurrent_streams);
  // nghttp2_session_mem_recv failed with `error`: the connection is over.
  void OnReceiveError(int error);
  // A GOAWAY with `error_code` went to the caller.
  void OnGoawaySent(uint32_t error_code);
  // The connection is refused for `reason`: counted, once a connection.
  void Refuse(CallRefusal reason);

 private:
  const CallerLimits limits_;
  FetchObserver& observer_;
  bool refused_ = false;
  uint8_t last_frame_type_ = 0;
  double reset_tokens_;
  absl::Time reset_refilled_ = absl::Now();
};

}  // namespace egress::dataplane

#endif  // EGRESS_SERVICE_DATAPLANE_CALLER_LIMITS_H_
