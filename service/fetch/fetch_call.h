#ifndef EGRESS_SERVICE_FETCH_FETCH_CALL_H_
#define EGRESS_SERVICE_FETCH_FETCH_CALL_H_

// One Fetch or FetchStream call's life, whichever front end carries it: admit it, send
// each hop (quotas, redirects) to the transport, answer through the caller side
// (caller_side.h), and finish it (status, counts, access log line).

#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "egress/v1/egress.pb.h"
#include "service/access_log/access_log.h"
#include "service/config/config.h"
#include "service/fetch/caller_side.h"
#include "service/fetch/fetch_context.h"
#include "service/fetch/inline_arena.h"
#include "service/fetch/trace_context.h"
#include "service/limits/quotas.h"
#include "service/base/error_reason.h"
#include "service/transport/transport.h"

namespace egress::fetch {

// The most body bytes one read asks the transport for.
constexpr size_t kStreamChunkBytes = 64 * 1024;

// One access log line, submitted when its last owner lets go of it: the call once the
// caller side and the transport are done with it, and the response body's settlement
// once its connection is pooled, drained or closed (whichever comes last; each writes
// only its own part).
class AccessLogLine {
  // The entry's messages and short strings: no allocation each (a Timing and its
  // Durations are seven messages).
  InlineArena<2048> arena_;

 public:
  AccessLogLine(AccessLog& log, const AccessLogSettings& settings);
  ~AccessLogLine();  // submits the line

  egress::v1::AccessLogEntry& entry;  // the call's part
  std::string drain;                  // the settlement's part
  uint64_t drained_bytes = 0;

 private:
  AccessLog& log_;
  const AccessLogSettings settings_;
};

// The call's logic over a CallerSide. The caller side owns it (a member, say) and frees
// it in CallerSide::Release: once the caller side is Done and no transport callback is
// due, whichever comes last.
class FetchCall {
 public:
  enum class Rpc {
    kFetch,        // unary: the body per body_mode, in one answer
    kFetchStream,  // the head, then body chunks at the caller's pace
  };

  FetchCall(Rpc rpc, CallerSide& caller) : rpc_(rpc), caller_(caller) {}
  ~FetchCall();
  FetchCall(const FetchCall&) = delete;
  FetchCall& operator=(const FetchCall&) = delete;

  // Starts the call under the config in force now; the request's body is moved out. A
  // request that cannot be sent finishes the call before Start returns.
  void Start(const Context& service, egress::v1::FetchRequest& request);
  // The caller cancelled: aborts the exchange, or the body read under way (whose
  // connection then closes), so that nothing runs on for it.
  void Cancel();
  // The last SendHead or SendBody is over: OK when the caller took it, else why not (the
  // caller went away, or stopped taking messages); the body is then let go of.
  void OnSent(absl::Status status);
  // Nothing more comes from the caller side (after Finish; gRPC's OnDone).
  void Done();

  // The fetch's deadline: the caller's, its timeout and limits.max_timeout, whichever
  // comes first. Set before the exchange starts.
  absl::Time deadline() const { return deadline_; }

 private:
  void Begin(egress::v1::FetchRequest& request);
  absl::Status Admit(const egress::v1::FetchRequest& request) const;

  // Runs a callback from the transport or the caller side. An exception stops here (it
  // must not unwind into the transport's I/O loop or the front end's threads): the call
  // finishes with INTERNAL, counted in egress_fetches_total{code="INTERNAL"}, and the
  // body is closed.
  template <class Callback>
  void Guarded(const char* where, Callback&& callback) {
    try {
      callback();
    } catch (const std::exception& e) {
      Abandon(where, e.what());
      Complete(Internal(where));
    } catch (...) {
      Abandon(where, "an exception that is not a std::exception");
      Complete(Internal(where));
    }
  }

  // The hops: quota, dispatch, redirect.
  void Send(transport::HttpRequest request);
  void OnGlobalToken(const QuotaRule& rule, const absl::StatusOr<QuotaTake>& take,
                     transport::HttpRequest request);
  void Dispatch(transport::HttpRequest request);
  void OnTransportResponse(absl::StatusOr<transport::Response> response);

  // The answer: the final hop's response, then its body per the RPC.
  void OnResponse(absl::StatusOr<transport::Response> response);
  void ReadWhole();
  void OnWholeBody(absl::StatusOr<std::string> bytes);
  void Answer();
  void OnStreamBody(absl::StatusOr<std::string> bytes);

  // Reserves `bytes` more of limits.buffered_body_budget_bytes for this call until it is
  // deleted; the error to finish with when the budget is spent.
  absl::Status ReserveBody(uint64_t bytes);
  void ReleaseBody(uint64_t bytes);
  // Keeps the response's body to read; closes it at once when the caller has already
  // cancelled.
  void KeepBody(std::unique_ptr<transport::ResponseBody> body);
  // Set once by KeepBody, on the I/O thread that then reads it.
  transport::ResponseBody& body() { return *body_; }
  bool cancelled();

  // The end of the transport's part: finishes the call.
  void Complete(absl::Status status);
  // Finishes the call, once: the answer, the counts, the log line.
  void Report(const absl::Status& status);

  void StartLogLine(AccessLog& log, const egress::v1::FetchRequest& request);
  void NoteResponse(const transport::Response& response);
  void NoteWouldDeny(const std::vector<std::string>& rules);
  void FinishLogLine(const absl::Status& status, const transport::ErrorReason& reason,
                     absl::string_view code, absl::Duration total);

  void Abandon(const char* where, const char* what);
  static absl::Status Internal(const char* where);
  void Unref();

  const Rpc rpc_;
  CallerSide& caller_;
  const Context* service_ = nullptr;
  absl::Time start_;
  std::shared_ptr<const ServiceConfig> config_;  // the config this call started under
  TraceContext trace_;
  std::string caller_id_;          // the caller's identity
  bool caller_counted_ = false;    // in service_->caller_counts
  QuotaTable::Lease quota_lease_;  // the current hop's place under its quota rule
  uint64_t reserved_ = 0;          // of service_->body_budget
  std::atomic<bool> reported_{false};
  absl::Time deadline_;
  bool deadline_capped_ = false;  // limits.max_timeout set deadline_
  bool follow_redirects_ = false;
  uint32_t redirects_ = 0;
  transport::HttpRequest request_;  // the current hop, when following redirects
  std::string url_;                 // the current hop's URL
  bool sent_ = false;               // the transport has been asked
  uint64_t bytes_received_ = 0;     // body bytes given to the caller
  uint64_t request_bytes_ = 0;      // request body bytes sent, every hop
  uint32_t connections_opened_ = 0;  // hops that got a new connection
  uint32_t tls_handshakes_ = 0;     // ... over TLS
  std::string allow_rule_;          // the last hop's, for the access log
  std::shared_ptr<AccessLogLine> log_line_;  // null when egressd writes no access log

  // Fetch: the body_mode's limit, and the bytes read so far.
  egress::v1::BodyMode body_mode_ = egress::v1::BODY_MODE_UNSPECIFIED;
  uint64_t max_body_bytes_ = 0;  // as the caller asked
  uint64_t body_limit_ = 0;
  std::string whole_body_;
  // FetchStream: body bytes sent and not yet taken, reserved from the budget.
  uint64_t chunk_bytes_ = 0;

  std::atomic<int> refs_{1};  // the caller side's, released in Done
  std::mutex mu_;
  std::shared_ptr<transport::PendingFetch> pending_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<transport::ResponseBody> body_;  // written under mu_, once
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace egress::fetch

#endif  // EGRESS_SERVICE_FETCH_FETCH_CALL_H_
