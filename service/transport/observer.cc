#include "service/transport/observer.h"

namespace egress::transport {

// These strings are Prometheus label values: keep them stable.
absl::string_view ToString(ConnectionState state) {
  switch (state) {
    case ConnectionState::kConnecting: return "connecting";
    case ConnectionState::kActive: return "active";
    case ConnectionState::kDraining: return "draining";
    case ConnectionState::kIdle: return "idle";
    case ConnectionState::kClosed: return "closed";
  }
  return "unknown";
}

absl::string_view ToString(CloseReason reason) {
  switch (reason) {
    case CloseReason::kDialFailed: return "dial_failed";
    case CloseReason::kConnectionClose: return "connection_close";
    case CloseReason::kUnreadBody: return "unread_body";
    case CloseReason::kDrainAbandoned: return "drain_abandoned";
    case CloseReason::kIdleTimeout: return "idle_timeout";
    case CloseReason::kPoolFull: return "pool_full";
    case CloseReason::kError: return "error";
    case CloseReason::kStale: return "stale";
    case CloseReason::kCancelled: return "cancelled";
    case CloseReason::kShutdown: return "shutdown";
    case CloseReason::kPolicy: return "policy";
    case CloseReason::kServerHint: return "server_hint";
    case CloseReason::kMaxAge: return "max_age";
    case CloseReason::kMaxRequests: return "max_requests";
    case CloseReason::kGoaway: return "goaway";
    case CloseReason::kHttp2Off: return "http2_off";
  }
  return "unknown";
}

absl::string_view ToString(RetryReason reason) {
  switch (reason) {
    case RetryReason::kStale: return "stale";
    case RetryReason::kConnectFailed: return "connect_failed";
    case RetryReason::kReset: return "reset";
    case RetryReason::kStatus: return "status";
    case RetryReason::kRefusedStream: return "refused_stream";
  }
  return "unknown";
}

absl::string_view ToString(DrainSkipReason reason) {
  switch (reason) {
    case DrainSkipReason::kConnectionClose: return "connection_close";
    case DrainSkipReason::kOverByteCap: return "over_byte_cap";
    case DrainSkipReason::kDisabled: return "disabled";
    case DrainSkipReason::kOverBudget: return "over_budget";
    case DrainSkipReason::kSlowerThanDial: return "slower_than_dial";
  }
  return "unknown";
}

absl::string_view ToString(DrainAbandonReason reason) {
  switch (reason) {
    case DrainAbandonReason::kByteCap: return "byte_cap";
    case DrainAbandonReason::kTimeCap: return "time_cap";
    case DrainAbandonReason::kError: return "error";
    case DrainAbandonReason::kSlowerThanDial: return "slower_than_dial";
    case DrainAbandonReason::kBudget: return "budget";
  }
  return "unknown";
}

absl::string_view ToString(DrainAwareChoice choice) {
  switch (choice) {
    case DrainAwareChoice::kWait: return "wait";
    case DrainAwareChoice::kDial: return "dial";
  }
  return "unknown";
}

absl::string_view ToString(UpstreamLimit limit) {
  switch (limit) {
    case UpstreamLimit::kResponseHead: return "response_head";
    case UpstreamLimit::kChunkLine: return "chunk_line";
    case UpstreamLimit::kTrailers: return "trailers";
    case UpstreamLimit::kInterimResponses: return "interim_responses";
  }
  return "unknown";
}

absl::string_view ToString(DnsResult result) {
  switch (result) {
    case DnsResult::kOk: return "ok";
    case DnsResult::kNxdomain: return "nxdomain";
    case DnsResult::kTimeout: return "timeout";
    case DnsResult::kError: return "error";
    case DnsResult::kCancelled: return "cancelled";
    case DnsResult::kOverLimit: return "over_limit";
  }
  return "unknown";
}

absl::string_view ToString(ConnectAttemptResult result) {
  switch (result) {
    case ConnectAttemptResult::kConnected: return "connected";
    case ConnectAttemptResult::kFailed: return "failed";
    case ConnectAttemptResult::kAbandoned: return "abandoned";
  }
  return "unknown";
}

absl::string_view ToString(BreakerState state) {
  switch (state) {
    case BreakerState::kClosed: return "closed";
    case BreakerState::kOpen: return "open";
    case BreakerState::kHalfOpen: return "half_open";
  }
  return "unknown";
}

}  // namespace egress::transport
