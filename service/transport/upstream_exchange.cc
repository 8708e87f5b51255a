#include "service/transport/upstream_exchange.h"

#include <utility>

#include "service/transport/http1/response_limits.h"
#include "service/transport/http2/errors.h"

namespace egress::transport {

void UpstreamExchange::Take(ConnectionPool::Lease lease) {
  lease_ = std::move(lease);
  // Read before the request goes: an HTTP/1.1 connection counts it once it is sent.
  reused_ = lease_.multiplexed ? lease_.reused : lease_.connection->requests() > 0;
  attached_ = true;
  stream_ = nullptr;
}

void UpstreamExchange::Dialed() {
  if (lease_.connection->protocol() != Connection::Protocol::kHttp2) return;
  lease_.multiplexed = true;
  reused_ = lease_.reused;
}

void UpstreamExchange::Send(const HttpRequest& request, const TransportSettings& settings,
                            absl::Time deadline, std::mutex& mu, HeadCallback on_head) {
  if (lease_.multiplexed) {
    observer_.OnStreamOpened(request.origin);
    // Under the lock: the head (which the owner's Detach and the body take the stream
    // with) may come on the session's thread before OpenStream has returned here; it
    // waits for the lock. OpenStream runs no callback inside the call.
    std::lock_guard<std::mutex> lock(mu);
    stream_ = lease_.connection->OpenStream(
        request, deadline, [on_head = std::move(on_head)](absl::StatusOr<ResponseHead> head) {
          on_head(std::move(head), /*response_started=*/false);
        });
    if (aborted_) stream_->Reset();  // a cancel that came before the stream was there
    return;
  }
  lease_.connection->Send(request, settings.response_header_timeout,
                          ResponseLimits{settings.max_response_header_bytes,
                                         settings.max_chunk_line_bytes,
                                         settings.max_interim_responses},
                          deadline, std::move(on_head));
}

void UpstreamExchange::Abort() {
  aborted_ = true;
  if (!attached_) return;
  if (!lease_.multiplexed) return lease_.connection->Close();
  if (stream_) stream_->Reset();  // the stream alone: the connection is shared
}

void UpstreamExchange::Detach() { attached_ = false; }

void UpstreamExchange::GiveBack(CloseReason reason) {
  if (stream_) {  // sent on a stream: the stream ends here
    observer_.OnStreamClosed(lease_.connection->origin());
    stream_ = nullptr;
  }
  ReleaseUnused(pool_, lease_, reason);
}

UpstreamExchange::HeadFailure UpstreamExchange::GiveBackAfterFailedHead(
    const absl::Status& status, bool response_started, bool cancelled) {
  HeadFailure failure;
  failure.stale =
      lease_.reused && !response_started && !cancelled && absl::IsUnavailable(status);
  if (lease_.multiplexed) {
    failure.not_processed = http2::WasNotProcessed(status);
  } else {
    failure.closed_while_idle = failure.stale;
  }
  // A stream is given back whatever the reason.
  GiveBack(failure.stale ? CloseReason::kStale
           : cancelled   ? CloseReason::kCancelled
                         : CloseReason::kError);
  return failure;
}

void UpstreamExchange::ReleaseUnused(ConnectionPool& pool, const ConnectionPool::Lease& lease,
                                     CloseReason reason) {
  if (lease.multiplexed) return pool.ReturnStream(lease.connection);
  pool.Retire(lease.connection, reason);
}

void UpstreamExchange::ReturnUnused(ConnectionPool& pool, const ConnectionPool::Lease& lease) {
  if (lease.multiplexed) return pool.ReturnStream(lease.connection);
  pool.Return(lease.connection);
}

void UpstreamExchange::ReadBody(size_t max_bytes, absl::Time deadline, ReadCallback done) {
  if (lease_.multiplexed) {
    return stream_->Read(max_bytes, deadline,
                         [stream = stream_, done = std::move(done)](
                             absl::StatusOr<std::string> bytes) {
                           const bool ended = stream->BodyEnded();
                           done(std::move(bytes), ended);
                         });
  }
  // BodyEnded is read in the callback, on the connection's loop, where it tells a last
  // read from one that needs another.
  lease_.connection->ReadBody(
      max_bytes, deadline,
      [connection = lease_.connection, done = std::move(done)](absl::StatusOr<std::string> bytes) {
        const bool ended = connection->BodyEnded();
        done(std::move(bytes), ended);
      });
}

void UpstreamExchange::CutReadShort(const BodySettler& settler) {
  if (lease_.multiplexed) return stream_->Reset();
  const Connection& connection = *lease_.connection;
  const DrainSettings drain = settler.DrainFor(connection.origin().host);
  lease_.connection->CutReadShortAfter(drain.mode == DrainMode::kOff ? absl::ZeroDuration()
                                                                     : drain.max_duration);
}

void UpstreamExchange::Settle(BodySettler& settler, bool read_failed, bool let_go,
                              SettledCallback settled) {
  if (lease_.multiplexed) {
    return settler.FinishStream(lease_.connection, *stream_, /*failed=*/read_failed && !let_go,
                                settled);
  }
  // Cut short after the body was let go of: the connection closed under the read.
  if (read_failed && let_go) return settler.FinishCancelled(lease_.connection, settled);
  settler.FinishResponse(lease_.connection, std::move(settled));
}

}  // namespace egress::transport
