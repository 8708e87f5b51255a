#ifndef EGRESS_SERVICE_TRANSPORT_RESPONSE_H_
#define EGRESS_SERVICE_TRANSPORT_RESPONSE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "service/transport/body_settler.h"
#include "service/transport/http1/response_parser.h"
#include "service/transport/observer.h"
#include "service/transport/pool/connection.h"
#include "service/transport/upstream_exchange.h"

namespace egress::transport {

// How a request got its connection, like Go's httptrace.GotConnInfo, plus timings.
struct ConnectionDetails {
  uint64_t connection_id = 0;
  bool reused = false;    // the connection had carried an earlier request
  bool was_idle = false;  // it came from the idle pool
  absl::Duration idle_time;
  std::string remote_address;
  std::string protocol;  // "http/1.1" or "h2"
  DialTiming dial;  // zero for a reused connection
  absl::Duration time_to_first_byte;
  bool retried = false;  // sent more than once: a dead pooled connection replaced, or retried
};

// The body of a response, read by its caller in pieces, like Go's resp.Body. What the
// caller does not read is drained in the background (or the connection closed) per the
// drain policy when the body is closed or destroyed. Thread-safe; one Read at a time.
class ResponseBody {
 public:
  // The body of `exchange`'s response (its head delivered), read until `deadline`;
  // `settler` (which outlives the body) takes it when let go of.
  ResponseBody(UpstreamExchange exchange, absl::Time deadline, BodySettler& settler);
  ~ResponseBody();
  ResponseBody(const ResponseBody&) = delete;
  ResponseBody& operator=(const ResponseBody&) = delete;

  // Reads up to max_bytes (at least one byte unless the body has ended); an empty
  // string means the body ended. Close during a read gives that read the drain's time
  // cap to finish (the rest then drains as usual), else the connection closes under it;
  // its callback gets CANCELLED either way.
  void Read(size_t max_bytes, Connection::ReadCallback done);
  // Lets go of the body; returns at once. Idempotent. What is left is drained or the
  // connection closed, per the drain policy.
  void Close();
  // `settled` runs once when the connection has been pooled, drained or closed after
  // the body: on the thread that ends it (an I/O thread, or the one calling Close or
  // destroying the body). Set it before the body ends or is closed.
  void OnSettled(SettledCallback settled);

 private:
  struct State;

  std::shared_ptr<State> state_;
};

struct Response {
  ResponseHead head;
  ConnectionDetails connection;
  std::unique_ptr<ResponseBody> body;
  // The report-only rules that would have denied this fetch (policy.report_only), named
  // as PolicyVerdict names them; for the access log's "would deny". A reused connection
  // is judged by the address it is connected to.
  std::vector<std::string> would_deny_rules;
  // The rule that let the fetch through, named the same way ("allow_cidrs:10.0.0.0/8",
  // "default_allow", ...), for the access log.
  std::string policy_rule;
};

// Runs once with a fetch's response head and body, or the error that prevented them.
using ResponseCallback = std::function<void(absl::StatusOr<Response>)>;

// A request under way; Cancel aborts it (its callback gets CANCELLED) unless its
// response has already been delivered.
class PendingFetch {
 public:
  virtual ~PendingFetch() = default;
  virtual void Cancel() = 0;
};

}  // namespace egress::transport

#endif  // EGRESS_SERVICE_TRANSPORT_RESPONSE_H_
