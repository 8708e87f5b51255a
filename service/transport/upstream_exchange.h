#ifndef EGRESS_SERVICE_TRANSPORT_UPSTREAM_EXCHANGE_H_
#define EGRESS_SERVICE_TRANSPORT_UPSTREAM_EXCHANGE_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "service/transport/body_settler.h"
#include "service/transport/http/request.h"
#include "service/transport/http2/stream.h"
#include "service/transport/observer.h"
#include "service/transport/pool/connection.h"
#include "service/transport/pool/connection_pool.h"
#include "service/transport/settings.h"

namespace egress::transport {

// One request's hold on an upstream: a connection of its own (HTTP/1.1, or one still
// dialing), or one stream of a shared HTTP/2 connection (ConnectionPool::Lease::
// multiplexed). Every difference between the two lives here: how the request is sent,
// how a cancel aborts it (the connection closed, or the stream alone reset), how the
// lease goes back, how the body is read and cut short, and how it settles.
//
// Not thread-safe on its own: a FetchAttempt holds it until the response head, and
// calls Take, Dialed, Abort, Detach and OwnsConnection under its lock (a Cancel may
// come on any thread); Send takes that lock itself to open a stream. Then the
// ResponseBody holds it, whose own lock orders the body's calls.
class UpstreamExchange {
 public:
  // The response head, or why there is none; `response_started` when part of a
  // response had come (never for a stream).
  using HeadCallback = Connection::HeadCallback;
  // Body bytes (an empty string when the body ended), and whether the body has been
  // read to its end with them.
  using ReadCallback = std::function<void(absl::StatusOr<std::string> bytes, bool body_ended)>;

  // What a response head that failed leaves to decide, once the hold is let go of.
  struct HeadFailure {
    // The server did not process the request (HTTP/2: GOAWAY, REFUSED_STREAM before
    // any head): safe to send again whatever the method (RFC 9113 8.7).
    bool not_processed = false;
    // A reused connection failed before any response byte (not by a cancel): the
    // server closed it while it idled, so the request never reached it.
    bool stale = false;
    // Stale, on a connection of its own: what a request not sent again is told.
    bool closed_while_idle = false;
  };

  // `pool` and `observer` outlive the exchange.
  UpstreamExchange(ConnectionPool& pool, TransportObserver& observer)
      : pool_(pool), observer_(observer) {}
  // Moved, from the attempt to the body, never copied: one hold, one holder.
  UpstreamExchange(UpstreamExchange&&) = default;
  UpstreamExchange(const UpstreamExchange&) = delete;
  UpstreamExchange& operator=(const UpstreamExchange&) = delete;

  // Holds `lease` from now on (a new one replaces an earlier one let go of).
  void Take(ConnectionPool::Lease lease);
  const ConnectionPool::Lease& lease() const { return lease_; }
  // The lease's connection, dialed, speaks HTTP/2: it is shared from now on, and the
  // request goes on a stream of it (a cancel resets the stream).
  void Dialed();
  // Whether the connection had carried a request before this one. A stream's lease
  // knows (others may open theirs on a new HTTP/2 connection before the request that
  // dialed it does); a connection of its own counts its requests.
  bool Reused() const { return reused_; }
  // Whether a connection of its own is held (Take to Detach): what Abort closes.
  bool OwnsConnection() const { return attached_ && !lease_.multiplexed; }

  // Sends the request: on the connection of its own, or on a stream it opens on the
  // shared one. `on_head` runs once with the response head or the failure. `mu` is the
  // owner's lock (see the class comment), held while the stream is opened: its head,
  // which may come on the session's thread before the stream is here, waits for it.
  void Send(const HttpRequest& request, const TransportSettings& settings,
            absl::Time deadline, std::mutex& mu, HeadCallback on_head);

  // A cancel: the connection of its own is closed (the pending I/O fails and reports
  // back), or the stream alone reset; one opened later is reset at once.
  void Abort();
  // From here Abort leaves the connection and the stream alone (they are being let go
  // of, or the body takes them).
  void Detach();

  // Lets go of the lease: a connection of its own is retired for `reason`; a stream (or
  // the right to open one) is given back, and its connection goes on carrying others.
  void GiveBack(CloseReason reason);
  // The response head failed with `status`: lets go of the lease (a connection of its
  // own retired as stale, cancelled or failed) and says what the failure means.
  HeadFailure GiveBackAfterFailedHead(const absl::Status& status, bool response_started,
                                      bool cancelled);

  // A lease that is not to be used after all (not this exchange's): a connection of its
  // own is retired for `reason`, a stream on a shared one given back.
  static void ReleaseUnused(ConnectionPool& pool, const ConnectionPool::Lease& lease,
                            CloseReason reason);
  // The same, for a lease whose connection is fine: it goes back to the pool idle.
  static void ReturnUnused(ConnectionPool& pool, const ConnectionPool::Lease& lease);

  // The body, after a head was delivered. Reads up to max_bytes (at least one unless
  // the body has ended).
  void ReadBody(size_t max_bytes, absl::Time deadline, ReadCallback done);
  // The body was let go of during a read: a stream is reset now (nothing waits for a
  // drain on HTTP/2) and the read ends CANCELLED; a read on a connection of its own may
  // finish within the drain's time cap (none when drains are off), else the connection
  // closes under it. Either way the read's callback then settles.
  void CutReadShort(const BodySettler& settler);
  // The body's end: a connection of its own goes back to the pool, drained first, or
  // closed; a stream is given back, reset when its body was left unread. `read_failed`
  // and `let_go`: how the last read ended, and whether the body was let go of first.
  void Settle(BodySettler& settler, bool read_failed, bool let_go, SettledCallback settled);

 private:
  ConnectionPool& pool_;
  TransportObserver& observer_;
  ConnectionPool::Lease lease_;
  bool reused_ = false;    // see Reused
  bool attached_ = false;  // Take to Detach: Abort acts
  bool aborted_ = false;   // Abort ran: a stream opened later is reset at once
  std::shared_ptr<http2::Stream> stream_;  // HTTP/2: the request's, once sent
};

}  // namespace egress::transport

#endif  // EGRESS_SERVICE_TRANSPORT_UPSTREAM_EXCHANGE_H_
