#ifndef EGRESS_SERVICE_FETCH_FETCH_CALL_H_
#define EGRESS_SERVICE_FETCH_FETCH_CALL_H_

// One Fetch or FetchStream call's life, shared by both reactors: admit it, send each hop
// (quotas, redirects), and finish it (status, counts, access log line).

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "egress/v1/egress.pb.h"
#include "google/protobuf/arena.h"
#include "grpcpp/server_context.h"
#include "service/access_log/access_log.h"
#include "service/config/config.h"
#include "service/config/proto_time.h"
#include "service/fetch/budgeted_body_memory.h"
#include "service/fetch/caller_identity.h"
#include "service/fetch/fetch_context.h"
#include "service/fetch/fetch_observer.h"
#include "service/fetch/fetch_trace.h"
#include "service/fetch/redirects.h"
#include "service/fetch/request_mapping.h"
#include "service/fetch/response_mapping.h"
#include "service/fetch/status_mapping.h"
#include "service/fetch/trace_context.h"
#include "service/fetch/utf8_text.h"
#include "service/limits/quota_store.h"
#include "service/limits/quotas.h"
#include "service/base/error_reason.h"
#include "service/transport/transport.h"

namespace egress::fetch {

using egress::v1::FetchRequest;
using transport::Response;

// The most body bytes one read asks the transport for.
constexpr size_t kStreamChunkBytes = 64 * 1024;

// One access log line, submitted when its last owner lets go of it: the reactor once
// gRPC and the transport are done with the RPC, and the response body's settlement once
// its connection is pooled, drained or closed (whichever comes last; each writes only
// its own part).
class AccessLogLine {
  // The entry's messages and short strings live in a block of the line's own, freed with
  // it: no allocation each (a Timing and its Durations are seven messages).
  alignas(8) char first_block_[2048];
  google::protobuf::Arena arena_;

 public:
  AccessLogLine(AccessLog& log, const AccessLogSettings& settings);
  ~AccessLogLine();  // submits the line

  egress::v1::AccessLogEntry& entry;  // the reactor's part
  std::string drain;                  // the settlement's part
  uint64_t drained_bytes = 0;

 private:
  static google::protobuf::ArenaOptions FirstBlock(char* block, size_t size);

  AccessLog& log_;
  const AccessLogSettings settings_;
};

// What both reactors share: starting the exchange, cancelling it before the head, and
// finishing. `Reactor` is the derived class (a gRPC reactor with OnResponse). A reactor
// is deleted when gRPC is done with it (OnDone) and no transport callback is due,
// whichever comes last.
template <class Reactor>
class ExchangeReactor {
 protected:
  ~ExchangeReactor() {
    if (service_) service_->body_budget.Release(reserved_);
  }

  // Starts the exchange; the reactor's OnResponse runs once, on an I/O thread, with the
  // final response (after any redirects followed). A request that cannot be sent
  // finishes the RPC at once. `config` is the snapshot the whole RPC runs under.
  void Start(const Context& service, std::shared_ptr<const ServiceConfig> config,
             const grpc::CallbackServerContext& context, FetchRequest& request) {
    service_ = &service;
    start_ = absl::Now();
    try {
      Begin(std::move(config), context, request);
    } catch (const std::exception& e) {
      Abandon("Start", e.what());
    } catch (...) {
      Abandon("Start", "an exception that is not a std::exception");
    }
  }

  // Runs a callback from the transport or from gRPC. An exception stops here (it must
  // not unwind into the transport's I/O loop or gRPC's threads): the RPC finishes with
  // INTERNAL, counted in egress_fetches_total{code="INTERNAL"}, and the body is closed.
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

  // Reserves `bytes` more of limits.buffered_body_budget_bytes for this RPC until it is
  // deleted; the error to finish with when the budget is spent.
  absl::Status ReserveBody(uint64_t bytes) {
    const uint64_t limit = config_->limits.buffered_body_budget_bytes;
    if (!service_->body_budget.TryReserve(bytes, limit)) return BodyBudgetExhausted(limit);
    reserved_ += bytes;
    return absl::OkStatus();
  }
  // Gives back bytes reserved by ReserveBody before the RPC ends.
  void ReleaseBody(uint64_t bytes) {
    service_->body_budget.Release(bytes);
    reserved_ -= bytes;
  }

  void Begin(std::shared_ptr<const ServiceConfig> config,
             const grpc::CallbackServerContext& context, FetchRequest& request) {
    const Context& service = *service_;
    config_ = std::move(config);
    trace_ = FetchSpan(context, request);
    url_ = request.url();
    if (service.access_log) StartLogLine(*service.access_log, context, request);
    // Known before any refusal, so that the log says whom it refused.
    caller_ = CallerIdentity(context, config_->callers);
    if (log_line_) log_line_->entry.set_caller(caller_);
    // Counted until OnDone; one over the limit is turned away with little work.
    const uint32_t limit = config_->limits.max_concurrent_fetches;
    const bool over_limit = service.fetches_in_flight.fetch_add(1) >= limit;
    if (service.stopped) {
      return Report(transport::WithReason(
          absl::UnavailableError("egressd is shutting down; retry on another instance"),
          "SHUTTING_DOWN", {}, absl::ZeroDuration()));
    }
    if (over_limit) {
      return Report(transport::WithReason(
          absl::ResourceExhaustedError(absl::StrCat(
              "egress is serving its limit of ", limit,
              " concurrent fetches (limits.max_concurrent_fetches); retry with backoff")),
          "CONCURRENCY_LIMIT", {{"limit", "limits.max_concurrent_fetches"}},
          transport::kRetryAfterLoad));
    }
    const uint32_t caller_limit = config_->limits.max_concurrent_fetches_per_caller;
    if (!service.caller_counts.TryAcquire(caller_, caller_limit)) {
      // Callers without an identity share one count.
      const std::string who = caller_.empty() ? "callers without an identity have their"
                                              : absl::StrCat("caller \"", caller_, "\" has its");
      return Report(transport::WithReason(
          absl::ResourceExhaustedError(absl::StrCat(
              who, " limit of ", caller_limit,
              " concurrent fetches under way (limits.max_concurrent_fetches_per_caller); "
              "retry with backoff")),
          "CALLER_CONCURRENCY_LIMIT",
          {{"limit", "limits.max_concurrent_fetches_per_caller"}, {"caller", caller_}},
          transport::kRetryAfterLoad));
    }
    caller_counted_ = caller_limit > 0;
    if (auto status = self()->Admit(request); !status.ok()) return Report(status);
    follow_redirects_ = request.follow_redirects();
    auto http_request = ToHttpRequest(request, config_->limits);  // checks the timeout too
    if (!http_request.ok()) return Report(http_request.status());
    deadline_ = Deadline(context, request, config_->limits, &deadline_capped_);
    http_request->caller = caller_;
    http_request->body_memory = std::make_shared<BudgetedBodyMemory>(
        service.body_budget, config_->limits.buffered_body_budget_bytes);
    SetTraceHeaders(trace_, &http_request->headers);
    refs_.fetch_add(1);  // the transport callback's
    Send(*std::move(http_request));
  }

  // The caller went away: aborts the exchange, or the body read under way (whose
  // connection then closes), so that nothing runs on for it.
  void CancelExchange() {
    transport::ResponseBody* body;
    {
      std::lock_guard<std::mutex> lock(mu_);
      cancelled_ = true;
      if (pending_) pending_->Cancel();
      body = body_.get();
    }
    if (body) body->Close();
  }

  // Keeps the response's body for the derived reactor to read; closes it at once when
  // the caller has already cancelled.
  void KeepBody(std::unique_ptr<transport::ResponseBody> body) {
    // What the body's end cost the caller (a drain), and what the log says of it.
    body->OnSettled([line = log_line_, observer = &service_->observer,
                     caller = caller_](const transport::BodySettlement& settlement) {
      if (line) {
        line->drain = settlement.outcome;
        line->drained_bytes = settlement.drained_bytes;
      }
      if (settlement.drained_bytes > 0) {
        CallerCost cost;
        cost.drain_bytes = settlement.drained_bytes;
        observer->OnCallerCost(caller, cost);
      }
    });
    bool cancelled;
    {
      std::lock_guard<std::mutex> lock(mu_);
      body_ = std::move(body);
      cancelled = cancelled_;
    }
    if (cancelled) body_->Close();
  }
  // Set once by KeepBody, on the I/O thread that then reads it.
  transport::ResponseBody& body() { return *body_; }
  // Body bytes given to the caller, for the access log.
  void CountBodyBytes(uint64_t bytes) { bytes_received_ += bytes; }

  // The end of the transport's part: finishes the RPC.
  void Complete(absl::Status status) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (cancelled_ && status.ok()) status = absl::CancelledError("the caller cancelled the request");
    }
    Report(std::move(status));
    Unref();
  }

  // gRPC's part is over.
  void Done() {
    // Counted until here, not until Finish: shutdown waits for the count to reach zero,
    // and only now has the answer been sent.
    service_->fetches_in_flight.fetch_sub(1);
    Unref();
  }

  // The fetch's deadline: the caller's, its timeout and limits.max_timeout, whichever
  // comes first. Set before the exchange starts.
  absl::Time fetch_deadline() const { return deadline_; }

  absl::Time start_;
  std::shared_ptr<const ServiceConfig> config_;  // the config this RPC started under
  TraceContext trace_;

 private:
  Reactor* self() { return static_cast<Reactor*>(this); }

  // Each hop is one upstream request under its host's quota; the last hop's place is
  // given back first (its exchange is over). A global rule's token comes from the quota
  // store, whose answer continues the hop on the store's thread.
  void Send(transport::HttpRequest request) {
    quota_lease_.Reset();
    const QuotaRule* rule = FindQuota(config_->quotas, caller_, request.origin.host);
    if (rule) {
      auto lease = service_->quotas.Acquire(*rule, caller_, absl::Now());
      if (!lease.ok()) return Complete(lease.status());
      quota_lease_ = *std::move(lease);
    }
    if (!rule || !rule->global) return Dispatch(std::move(request));
    auto hop = std::make_shared<transport::HttpRequest>(std::move(request));
    // The lease's bucket: callers past the table's bound share one in Redis too. The
    // store is the one in force (an RPC started under an older config asking for its
    // own would swap the store back and forth).
    service_->quota_stores.For(service_->config.Get()->quota_store)
        ->Take(absl::StrCat("egress:quota:", quota_lease_.bucket()),
               rule->requests_per_second, rule->burst,
               [this, rule, hop](absl::StatusOr<QuotaTake> take) {
                 Guarded("OnQuotaStore", [&] { OnGlobalToken(*rule, take, std::move(*hop)); });
               });
  }

  // The quota store's answer for a hop under a global rule (which the RPC's config_
  // keeps alive).
  void OnGlobalToken(const QuotaRule& rule, const absl::StatusOr<QuotaTake>& take,
                     transport::HttpRequest request) {
    // The wait for the store may have outlived the caller's patience.
    bool cancelled;
    {
      std::lock_guard<std::mutex> lock(mu_);
      cancelled = cancelled_;
    }
    if (cancelled) return Complete(absl::CancelledError("the caller cancelled the request"));
    if (absl::Now() >= deadline_) {
      return Complete(transport::WithReason(
          absl::DeadlineExceededError(absl::StrCat(
              "deadline expired while waiting for the quota store on quota \"", rule.name,
              "\"")),
          "DEADLINE_EXCEEDED"));
    }
    if (take.ok() && !take->admitted) {
      return Complete(service_->quotas.Refuse(rule, caller_, QuotaLimit::kRequestsPerSecond,
                                              take->retry_after));
    }
    if (!take.ok()) {
      const bool fail_closed = config_->quota_store.fail_closed;
      service_->observer.OnQuotaStoreError(fail_closed);
      if (fail_closed) {
        return Complete(transport::WithReason(
            absl::UnavailableError(absl::StrCat(
                "the quota store cannot say whether quota \"", rule.name,
                "\" allows this request, and it fails closed (quota_store.fail_closed): ",
                take.status().message(), "; retry later")),
            "QUOTA_STORE_UNAVAILABLE",
            {{"rule", rule.name}, {"redis", config_->quota_store.Address()}},
            absl::Seconds(1)));
      }
    }
    Dispatch(std::move(request));
  }

  // Hands one hop to the transport.
  void Dispatch(transport::HttpRequest request) {
    request_bytes_ += request.body.size();
    if (follow_redirects_) request_ = request;  // the next hop is made from it
    if (log_line_) {
      log_line_->entry.set_origin(request.origin.Key());
      log_line_->entry.set_bytes_sent(request.body.size());
    }
    sent_ = true;
    // The transport may answer before Fetch returns (a policy denial of an IP literal
    // needs no I/O), and finishing may drop the last other reference: hold one.
    refs_.fetch_add(1);
    auto pending = service_->transport.Fetch(
        std::move(request), deadline_,
        [this](absl::StatusOr<Response> response) {
          Guarded("OnTransportResponse", [&] { OnTransportResponse(std::move(response)); });
        });
    {
      std::lock_guard<std::mutex> lock(mu_);
      pending_ = std::move(pending);
      if (cancelled_) pending_->Cancel();
    }
    Unref();
  }

  // Follows a redirect when the caller asked for it; every hop goes through the
  // transport, and so through the egress policy, again.
  void OnTransportResponse(absl::StatusOr<Response> response) {
    if (response.ok()) {
      if (!response->connection.was_idle) {  // dialed for this hop
        ++connections_opened_;
        if (response->connection.dial.tls_resumed.has_value()) ++tls_handshakes_;  // https
      }
      NoteResponse(*response);
    } else {
      NoteWouldDeny(transport::WouldDenyRulesOf(response.status()));
    }
    const auto location = response.ok() ? RedirectLocation(*response) : std::nullopt;
    if (!follow_redirects_ || !location) return self()->OnResponse(std::move(response));
    response->body->Close();  // the redirect's own body drains
    if (redirects_ == config_->callers.max_redirects) {
      return Complete(transport::WithReason(
          transport::UrlError(
              absl::StatusCode::kResourceExhausted,
              absl::StrCat("stopped after ", redirects_, " redirects (policy.max_redirects) at "),
              url_, ""),
          "TOO_MANY_REDIRECTS", {{"limit", "policy.max_redirects"}}));
    }
    ++redirects_;
    std::string next_url = *location;
    auto next = NextHop(request_, url_, next_url, response->head.status_code,
                        config_->callers.redirect_strip_headers);
    if (!next.ok()) return Complete(next.status());
    url_ = std::move(next_url);
    Send(*std::move(next));
  }

  // Finishes the RPC, once. Messages may quote upstream bytes (a Location, a header):
  // escaped here, for every message, so that each is valid UTF-8.
  void Report(const absl::Status& status) {
    if (reported_.exchange(true)) return;  // an exception came after the RPC was finished
    std::string message(status.message());
    if (status.code() == absl::StatusCode::kDeadlineExceeded && deadline_capped_) {
      absl::StrAppend(&message, " (egress ends every fetch after ",
                      absl::FormatDuration(config_->limits.max_timeout), ": limits.max_timeout)");
    }
    // The error's ErrorInfo names the fetch's trace.
    const absl::Status final_status =
        WithTraceId(WithMessage(status, EscapeNonUtf8(message)), trace_.trace_id);
    const grpc::Status answer = ToGrpcStatus(final_status);
    const absl::Duration total = absl::Now() - start_;
    service_->observer.OnFetchDone(answer.error_code(), total);
    CallerCost cost;
    cost.fetches = 1;
    cost.request_bytes = request_bytes_;
    cost.response_bytes = bytes_received_;
    cost.connections_opened = connections_opened_;
    cost.tls_handshakes = tls_handshakes_;
    service_->observer.OnCallerCost(caller_, cost);
    if (log_line_) FinishLogLine(final_status, answer.error_code(), total);
    // The caller's place frees before its answer leaves: a caller that fetches one at a
    // time must not meet its own last fetch (OnDone may come well after the answer).
    if (caller_counted_) service_->caller_counts.Release(caller_);
    quota_lease_.Reset();
    self()->Finish(answer);
  }

  void StartLogLine(AccessLog& log, const grpc::CallbackServerContext& context,
                    const FetchRequest& request) {
    log_line_ = std::make_shared<AccessLogLine>(log, config_->access_log);
    egress::v1::AccessLogEntry& entry = log_line_->entry;
    ToProto(start_, entry.mutable_time());
    entry.set_rpc(Reactor::kRpcName);
    entry.set_peer(context.peer());
    entry.set_method(request.method().empty() ? "GET" : request.method());
    entry.set_trace_id(trace_.trace_id);
    entry.set_span_id(trace_.span_id);
    entry.set_parent_span_id(trace_.parent_id);
  }

  // What the access log says of a hop's response: the last hop's stays, and the
  // report-only rules of every hop.
  void NoteResponse(const Response& response) {
    if (!log_line_) return;
    egress::v1::AccessLogEntry& entry = log_line_->entry;
    const transport::ConnectionDetails& c = response.connection;
    entry.set_status_code(response.head.status_code);
    entry.set_remote_address(c.remote_address);
    entry.set_connection_reused(c.reused);
    entry.set_connection_id(c.connection_id);
    entry.set_protocol(c.protocol);
    FillTiming(c, absl::ZeroDuration(), entry.mutable_timing());
    allow_rule_ = response.policy_rule;
    NoteWouldDeny(response.would_deny_rules);
  }

  void NoteWouldDeny(const std::vector<std::string>& rules) {
    if (!log_line_) return;
    auto* logged = log_line_->entry.mutable_would_deny_rules();
    for (const auto& rule : rules) {
      if (std::find(logged->begin(), logged->end(), rule) == logged->end()) *logged->Add() = rule;
    }
  }

  void FinishLogLine(const absl::Status& status, grpc::StatusCode code, absl::Duration total) {
    egress::v1::AccessLogEntry& entry = log_line_->entry;
    entry.set_url(AccessLog::LoggedUrl(url_, config_->access_log.log_query));
    entry.set_grpc_code(std::string(GrpcCodeName(code)));
    entry.set_bytes_received(bytes_received_);
    entry.set_redirects(redirects_);
    ToProto(total, entry.mutable_timing()->mutable_total());
    const auto reason = transport::ReasonOf(status);
    if (!status.ok()) {
      entry.set_error_reason(ReasonFor(status));
      entry.set_error_message(AccessLog::LoggedMessage(status, config_->access_log.log_query));
    }
    if (reason && reason->reason == "POLICY_DENIED") {
      entry.set_policy_decision("deny");
      for (const auto& [key, value] : reason->metadata) {
        if (key == "rule") entry.set_policy_rule(value);
        // The address denied: it was resolved, but never connected to.
        if (key == "address" && entry.remote_address().empty()) entry.set_remote_address(value);
      }
    } else if (entry.would_deny_rules_size() > 0) {
      entry.set_policy_decision("would_deny");
      entry.set_policy_rule(entry.would_deny_rules(0));
    } else {
      // Nothing was asked of the policy when the fetch failed before it was sent.
      entry.set_policy_decision(sent_ ? "allow" : "none");
      entry.set_policy_rule(allow_rule_);
    }
  }

  // An exception reached a boundary: logged, the body (if any) closed, and the RPC
  // finished with INTERNAL unless it already was.
  void Abandon(const char* where, const char* what) {
    std::cerr << "egressd: exception in " << where << " (" << AccessLog::LoggedUrl(url_, false)
              << "): " << what << "\n";
    transport::ResponseBody* body;
    {
      std::lock_guard<std::mutex> lock(mu_);
      body = body_.get();
    }
    if (body) body->Close();
    Report(Internal(where));
  }
  static absl::Status Internal(const char* where) {
    return absl::InternalError(absl::StrCat("egress failed internally (in ", where,
                                            "); the fetch was abandoned, it may be retried"));
  }
  void Unref() {
    if (refs_.fetch_sub(1) == 1) delete self();
  }

  const Context* service_ = nullptr;
  std::string caller_;          // the caller's identity
  bool caller_counted_ = false;  // in service_->caller_counts
  QuotaTable::Lease quota_lease_;  // the current hop's place under its quota rule
  uint64_t reserved_ = 0;        // of service_->body_budget
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
  std::atomic<int> refs_{1};  // gRPC's, released in OnDone
  std::mutex mu_;
  std::shared_ptr<transport::PendingFetch> pending_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<transport::ResponseBody> body_;  // written under mu_, once
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace egress::fetch

#endif  // EGRESS_SERVICE_FETCH_FETCH_CALL_H_
