#include "service/dataplane/caller_limits.h"

#include <algorithm>
#include <chrono>
#include <new>

namespace egress::dataplane {

OptionPtr ServerOptions(const CallerLimits& limits) {
  nghttp2_option* option = nullptr;
  if (nghttp2_option_new(&option) != 0) throw std::bad_alloc();
  OptionPtr owned(option, &nghttp2_option_del);
  nghttp2_option_set_max_outbound_ack(option, limits.max_queued_acks);
  nghttp2_option_set_max_settings(option, limits.max_settings_entries);
  nghttp2_option_set_max_continuations(option, limits.max_continuations);
  // nghttp2's own bucket counts every RST_STREAM, answered streams' too: twice ours, a
  // backstop that CallerGuard::TakeReset, which sees each reset first, reaches before.
  nghttp2_option_set_stream_reset_rate_limit(option, 2 * uint64_t{limits.reset_burst},
                                             2 * uint64_t{limits.resets_per_second});
  return owned;
}

namespace {

// What a source is counted as: an IPv4 address, or an IPv6 /64 (what one host is given;
// an IPv4-mapped address is its IPv4 one).
std::string SourceOf(const boost::asio::ip::address& address) {
  if (address.is_v4()) {
    const auto bytes = address.to_v4().to_bytes();
    return std::string(bytes.begin(), bytes.end());
  }
  const auto v6 = address.to_v6();
  if (v6.is_v4_mapped()) return SourceOf(boost::asio::ip::make_address_v4(boost::asio::ip::v4_mapped, v6));
  const auto bytes = v6.to_bytes();
  return std::string(bytes.begin(), bytes.begin() + 8);
}

// The steady clock's time: ages that a step of the wall clock cannot move, in
// absl::Duration, whose sums with an infinite age stay infinite.
absl::Duration SteadyNow() {
  return absl::FromChrono(std::chrono::steady_clock::now().time_since_epoch());
}

}  // namespace

ConnectionSlot ConnectionLedger::Take(const boost::asio::ip::address& address) {
  std::string source = SourceOf(address);
  Close close_evicted;
  CallRefusal evicted_for = CallRefusal::kPrefaceEvicted;
  ConnectionSlot slot;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto from_source = by_source_.find(source);
    const uint32_t held = from_source == by_source_.end() ? 0 : from_source->second;
    // A source past its own bound evicts nobody.
    if (held >= limits_.max_connections_per_source) return ConnectionSlot();
    const absl::Duration now = SteadyNow();
    if (slots_.size() >= limits_.max_connections) {
      const auto [victim, reason] = Victim(now);
      if (victim == slots_.end()) return ConnectionSlot();
      close_evicted = std::move(victim->second.close);
      evicted_for = reason;
      Forget(victim);
    }
    const uint64_t id = next_id_++;
    ++by_source_[source];
    auto idle_since = std::make_shared<std::atomic<int64_t>>(0);
    slot = ConnectionSlot(shared_from_this(), id, idle_since);
    slots_.emplace(id, Slot{std::move(source), now, nullptr, std::move(idle_since)});
  }
  if (close_evicted) close_evicted(evicted_for);
  return slot;
}

std::pair<ConnectionLedger::SlotIterator, CallRefusal> ConnectionLedger::Victim(
    absl::Duration now) {
  if (!unproven_.empty()) {
    const SlotIterator oldest = slots_.find(*unproven_.begin());  // ids grow with time
    if (oldest->second.taken + limits_.eviction_age <= now) {
      return {oldest, CallRefusal::kPrefaceEvicted};
    }
  }
  if (now < no_idle_victim_before_) return {slots_.end(), CallRefusal::kIdleEvicted};
  // The longest idle, idle for the age at least: a scan, only when every slot is taken.
  SlotIterator idlest = slots_.end();
  absl::Duration earliest = now;  // the longest idle's start
  for (const uint64_t id : proven_) {
    const SlotIterator slot = slots_.find(id);
    const int64_t since = slot->second.idle_since->load(std::memory_order_relaxed);
    if (since != 0 && absl::Nanoseconds(since) <= earliest) {
      idlest = slot;
      earliest = absl::Nanoseconds(since);
    }
  }
  if (idlest != slots_.end() && earliest + limits_.idle_eviction_age <= now) {
    return {idlest, CallRefusal::kIdleEvicted};
  }
  // None yet: a connection idle now (or going idle later) is at least the age away.
  no_idle_victim_before_ = earliest + limits_.idle_eviction_age;
  return {slots_.end(), CallRefusal::kIdleEvicted};
}

void ConnectionLedger::Forget(SlotIterator slot) {
  unproven_.erase(slot->first);
  proven_.erase(slot->first);
  const auto from_source = by_source_.find(slot->second.source);
  if (--from_source->second == 0) by_source_.erase(from_source);
  slots_.erase(slot);
}

void ConnectionLedger::Release(uint64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (const SlotIterator slot = slots_.find(id); slot != slots_.end()) Forget(slot);
}

bool ConnectionLedger::EvictWith(uint64_t id, Close close) {
  std::lock_guard<std::mutex> lock(mutex_);
  const SlotIterator slot = slots_.find(id);
  if (slot == slots_.end()) return false;  // evicted
  slot->second.close = std::move(close);
  if (!proven_.count(id)) unproven_.insert(id);
  return true;
}

void ConnectionLedger::Proven(uint64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  const SlotIterator slot = slots_.find(id);
  if (slot == slots_.end()) return;
  unproven_.erase(id);
  if (slot->second.close) proven_.insert(id);
}

ConnectionSlot& ConnectionSlot::operator=(ConnectionSlot&& other) noexcept {
  if (this != &other) {
    Release();
    ledger_ = std::move(other.ledger_);
    id_ = other.id_;
    proven_ = other.proven_;
    idle_since_ = std::move(other.idle_since_);
  }
  return *this;
}

bool ConnectionSlot::EvictWith(std::function<void(CallRefusal)> close) {
  return !ledger_ || ledger_->EvictWith(id_, std::move(close));
}

void ConnectionSlot::Proven() {
  if (!ledger_ || proven_) return;
  proven_ = true;
  CallsOpen(false);
  ledger_->Proven(id_);
}

void ConnectionSlot::CallsOpen(bool open) {
  if (!proven_ || !idle_since_) return;
  idle_since_->store(open ? 0 : absl::ToInt64Nanoseconds(SteadyNow()),
                     std::memory_order_relaxed);
}

void ConnectionSlot::Release() {
  if (ledger_) ledger_->Release(id_);
  ledger_ = nullptr;
}

bool CallerGuard::TakeReset() {
  const absl::Time now = absl::Now();
  reset_tokens_ = std::min<double>(
      limits_.reset_burst,
      reset_tokens_ + absl::ToDoubleSeconds(now - reset_refilled_) * limits_.resets_per_second);
  reset_refilled_ = now;
  if (reset_tokens_ >= 1) {
    reset_tokens_ -= 1;
    return true;
  }
  Refuse(CallRefusal::kRapidReset);
  return false;
}

void CallerGuard::OnInvalidFrame(const nghttp2_frame& frame, int error, size_t open_streams,
                                 uint32_t max_concurrent_streams) {
  if (frame.hd.type != NGHTTP2_HEADERS) return;
  if (error == NGHTTP2_ERR_REFUSED_STREAM) {
    // Before the caller acknowledged the limit: the one stream is refused, and counted.
    observer_.OnCallRefused(CallRefusal::kTooManyStreams);
  } else if (open_streams >= max_concurrent_streams) {
    // After: nghttp2 ends the connection (GOAWAY PROTOCOL_ERROR).
    Refuse(CallRefusal::kTooManyStreams);
  }
}

void CallerGuard::OnReceiveError(int error) {
  if (error == NGHTTP2_ERR_TOO_MANY_CONTINUATIONS) return Refuse(CallRefusal::kContinuationFlood);
  if (error == NGHTTP2_ERR_FLOODED) {
    // nghttp2 refuses to queue one more acknowledgement, of the frame it was reading.
    if (last_frame_type_ == NGHTTP2_PING) return Refuse(CallRefusal::kPingFlood);
    if (last_frame_type_ == NGHTTP2_SETTINGS) return Refuse(CallRefusal::kSettingsFlood);
  }
  Refuse(CallRefusal::kProtocolError);
}

// A GOAWAY that CallerGuard did not decide on is nghttp2's: a SETTINGS frame of too many
// entries (ENHANCE_YOUR_CALM), its reset backstop, or a broken rule of HTTP/2.
void CallerGuard::OnGoawaySent(uint32_t error_code) {
  if (error_code == NGHTTP2_NO_ERROR) return;  // a graceful end, not a refusal
  if (last_frame_type_ == NGHTTP2_SETTINGS && error_code == NGHTTP2_ENHANCE_YOUR_CALM) {
    return Refuse(CallRefusal::kSettingsFlood);
  }
  if (last_frame_type_ == NGHTTP2_RST_STREAM && error_code == NGHTTP2_INTERNAL_ERROR) {
    return Refuse(CallRefusal::kRapidReset);
  }
  Refuse(CallRefusal::kProtocolError);
}

void CallerGuard::Refuse(CallRefusal reason) {
  if (refused_) return;
  refused_ = true;
  observer_.OnCallRefused(reason);
}

}  // namespace egress::dataplane
