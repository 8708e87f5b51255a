#include "service/fetch/fetch_call.h"

#include <algorithm>
#include <iostream>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "service/config/proto_time.h"
#include "service/fetch/budgeted_body_memory.h"
#include "service/fetch/caller_identity.h"
#include "service/fetch/fetch_observer.h"
#include "service/fetch/fetch_trace.h"
#include "service/fetch/redirects.h"
#include "service/fetch/request_mapping.h"
#include "service/fetch/response_mapping.h"
#include "service/fetch/status_mapping.h"
#include "service/fetch/utf8_text.h"
#include "service/limits/quota_store.h"

namespace egress::fetch {

using egress::v1::FetchRequest;
using transport::Response;

AccessLogLine::AccessLogLine(AccessLog& log, const AccessLogSettings& settings)
    : entry(arena_.Create<egress::v1::AccessLogEntry>()),
      log_(log),
      settings_(settings) {}

AccessLogLine::~AccessLogLine() {
  entry.set_drain(drain.empty() ? "none" : drain);
  entry.set_drained_bytes(drained_bytes);
  log_.Submit(entry, settings_);
}

FetchCall::~FetchCall() {
  if (service_) service_->body_budget.Release(reserved_);
}

void FetchCall::Start(const Context& service, FetchRequest& request) {
  service_ = &service;
  start_ = absl::Now();
  try {
    Begin(request);
  } catch (const std::exception& e) {
    Abandon("Start", e.what());
  } catch (...) {
    Abandon("Start", "an exception that is not a std::exception");
  }
}

void FetchCall::Begin(FetchRequest& request) {
  const Context& service = *service_;
  config_ = service.config.Get();
  body_mode_ = request.body_mode();
  max_body_bytes_ = request.max_body_bytes();
  switch (body_mode_) {
    case egress::v1::BODY_MODE_NONE: body_limit_ = 0; break;
    case egress::v1::BODY_MODE_PREFIX: body_limit_ = max_body_bytes_; break;
    default:
      body_limit_ = max_body_bytes_ ? max_body_bytes_ : config_->limits.default_max_body_bytes;
      break;
  }
  trace_ = FetchSpan(caller_, request);
  url_ = request.url();
  if (service.access_log) StartLogLine(*service.access_log, request);
  // Known before any refusal, so that the log says whom it refused.
  caller_id_ = CallerIdentity(caller_, config_->callers);
  if (log_line_) log_line_->entry.set_caller(caller_id_);
  // Counted until Done; one over the limit is turned away with little work.
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
  if (!service.caller_counts.TryAcquire(caller_id_, caller_limit)) {
    // Callers without an identity share one count.
    const std::string who = caller_id_.empty()
                                ? "callers without an identity have their"
                                : absl::StrCat("caller \"", caller_id_, "\" has its");
    return Report(transport::WithReason(
        absl::ResourceExhaustedError(absl::StrCat(
            who, " limit of ", caller_limit,
            " concurrent fetches under way (limits.max_concurrent_fetches_per_caller); "
            "retry with backoff")),
        "CALLER_CONCURRENCY_LIMIT",
        {{"limit", "limits.max_concurrent_fetches_per_caller"}, {"caller", caller_id_}},
        transport::kRetryAfterLoad));
  }
  caller_counted_ = caller_limit > 0;
  if (auto status = Admit(request); !status.ok()) return Report(status);
  follow_redirects_ = request.follow_redirects();
  auto http_request = ToHttpRequest(request, config_->limits);  // checks the timeout too
  if (!http_request.ok()) return Report(http_request.status());
  deadline_ = Deadline(caller_.Deadline(), request, config_->limits, &deadline_capped_);
  http_request->caller = caller_id_;
  http_request->body_memory = std::make_shared<BudgetedBodyMemory>(
      service.body_budget, config_->limits.buffered_body_budget_bytes);
  SetTraceHeaders(trace_, &http_request->headers);
  refs_.fetch_add(1);  // the transport callback's
  Send(*std::move(http_request));
}

// Fetch: a caller may not make egress hold more than the ceiling for it.
// INVALID_ARGUMENT, not RESOURCE_EXHAUSTED: the same request fails the same way whatever
// the load, so retrying cannot help; the budget (limits.buffered_body_budget_bytes) is
// what says "not now". FetchStream ignores max_body_bytes: it holds one chunk at a time.
absl::Status FetchCall::Admit(const FetchRequest& request) const {
  const uint64_t ceiling = config_->limits.max_body_bytes_ceiling;
  if (rpc_ == Rpc::kFetchStream || request.body_mode() == egress::v1::BODY_MODE_NONE ||
      request.max_body_bytes() <= ceiling) {
    return absl::OkStatus();
  }
  return transport::WithReason(
      absl::InvalidArgumentError(absl::StrCat(
          "max_body_bytes of ", request.max_body_bytes(), " is above the limit of ", ceiling,
          " bytes (limits.max_body_bytes_ceiling); ask for at most that, or read the body "
          "with FetchStream")),
      "MAX_BODY_BYTES_ABOVE_CEILING", {{"limit", "limits.max_body_bytes_ceiling"}});
}

void FetchCall::Cancel() {
  transport::ResponseBody* body;
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
    if (pending_) pending_->Cancel();
    body = body_.get();
  }
  if (body) body->Close();
}

bool FetchCall::cancelled() {
  std::lock_guard<std::mutex> lock(mu_);
  return cancelled_;
}

void FetchCall::Done() {
  // Counted until here, not until Finish: shutdown waits for the count to reach zero,
  // and only now has the answer been sent.
  service_->fetches_in_flight.fetch_sub(1);
  Unref();
}

// Each hop is one upstream request under its host's quota; the last hop's place is given
// back first (its exchange is over). A global rule's token comes from the quota store,
// whose answer continues the hop on the store's thread.
void FetchCall::Send(transport::HttpRequest request) {
  quota_lease_.Reset();
  const QuotaRule* rule = FindQuota(config_->quotas, caller_id_, request.origin.host);
  if (rule) {
    auto lease = service_->quotas.Acquire(*rule, caller_id_, absl::Now());
    if (!lease.ok()) return Complete(lease.status());
    quota_lease_ = *std::move(lease);
  }
  if (!rule || !rule->global) return Dispatch(std::move(request));
  auto hop = std::make_shared<transport::HttpRequest>(std::move(request));
  // The lease's bucket: callers past the table's bound share one in Redis too. The store
  // is the one in force (a call started under an older config asking for its own would
  // swap the store back and forth).
  service_->quota_stores.For(service_->config.Get()->quota_store)
      ->Take(absl::StrCat("egress:quota:", quota_lease_.bucket()), rule->requests_per_second,
             rule->burst, [this, rule, hop](absl::StatusOr<QuotaTake> take) {
               Guarded("OnQuotaStore", [&] { OnGlobalToken(*rule, take, std::move(*hop)); });
             });
}

// The quota store's answer for a hop under a global rule (which the call's config_ keeps
// alive).
void FetchCall::OnGlobalToken(const QuotaRule& rule, const absl::StatusOr<QuotaTake>& take,
                              transport::HttpRequest request) {
  // The wait for the store may have outlived the caller's patience.
  if (cancelled()) return Complete(absl::CancelledError("the caller cancelled the request"));
  if (absl::Now() >= deadline_) {
    return Complete(transport::WithReason(
        absl::DeadlineExceededError(absl::StrCat(
            "deadline expired while waiting for the quota store on quota \"", rule.name, "\"")),
        "DEADLINE_EXCEEDED"));
  }
  if (take.ok() && !take->admitted) {
    return Complete(service_->quotas.Refuse(rule, caller_id_, QuotaLimit::kRequestsPerSecond,
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
          {{"rule", rule.name}, {"redis", config_->quota_store.Address()}}, absl::Seconds(1)));
    }
  }
  Dispatch(std::move(request));
}

// Hands one hop to the transport.
void FetchCall::Dispatch(transport::HttpRequest request) {
  request_bytes_ += request.body.size();
  if (follow_redirects_) request_ = request;  // the next hop is made from it
  if (log_line_) {
    log_line_->entry.set_origin(request.origin.Key());
    log_line_->entry.set_bytes_sent(request.body.size());
  }
  sent_ = true;
  // The transport may answer before Fetch returns (a policy denial of an IP literal needs
  // no I/O), and finishing may drop the last other reference: hold one.
  refs_.fetch_add(1);
  auto pending = service_->transport.Fetch(
      std::move(request), deadline_, [this](absl::StatusOr<Response> response) {
        Guarded("OnTransportResponse", [&] { OnTransportResponse(std::move(response)); });
      });
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_ = std::move(pending);
    if (cancelled_) pending_->Cancel();
  }
  Unref();
}

// Follows a redirect when the caller asked for it; every hop goes through the transport,
// and so through the egress policy, again.
void FetchCall::OnTransportResponse(absl::StatusOr<Response> response) {
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
  if (!follow_redirects_ || !location) return OnResponse(std::move(response));
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

// The final hop's response, on an I/O thread: Fetch reads the body per body_mode, then
// answers; FetchStream sends the head, then the body at the caller's pace. Unread bytes
// are left to auto-drain.
void FetchCall::OnResponse(absl::StatusOr<Response> response) {
  if (!response.ok()) return Complete(response.status());
  FillHead(*response, start_, trace_, &caller_.Response());
  KeepBody(std::move(response->body));
  if (rpc_ == Rpc::kFetchStream) return caller_.SendHead();  // OnSent follows
  if (body_limit_ == 0 && body_mode_ != egress::v1::BODY_MODE_PREFIX) {
    body().Close();  // BODY_MODE_NONE: the rest is left to auto-drain
    return Answer();
  }
  ReadWhole();
}

// Fetch: reads up to one byte past the limit: that byte tells "larger" from "exactly".
void FetchCall::ReadWhole() {
  const uint64_t wanted = body_limit_ + 1 - whole_body_.size();
  body().Read(static_cast<size_t>(std::min<uint64_t>(wanted, kStreamChunkBytes)),
              [this](absl::StatusOr<std::string> bytes) {
                Guarded("OnBody", [&] { OnWholeBody(std::move(bytes)); });
              });
}

void FetchCall::OnWholeBody(absl::StatusOr<std::string> bytes) {
  if (!bytes.ok()) return Complete(bytes.status());
  // The byte past the limit only tells "larger" from "exactly": it is not kept.
  const uint64_t kept = std::min<uint64_t>(bytes->size(), body_limit_ - whole_body_.size());
  if (auto status = ReserveBody(kept); !status.ok()) {
    body().Close();
    return Complete(status);
  }
  const bool ended = bytes->empty();
  whole_body_.append(*bytes);
  if (!ended && whole_body_.size() <= body_limit_) return ReadWhole();

  body().Close();
  const bool over = whole_body_.size() > body_limit_;
  if (over && body_mode_ != egress::v1::BODY_MODE_PREFIX) {
    return Complete(transport::WithReason(
        absl::ResourceExhaustedError(absl::StrCat(
            "response body is larger than max_body_bytes (", body_limit_,
            " bytes); raise max_body_bytes, or use BODY_MODE_PREFIX or FetchStream to read "
            "part of it")),
        "RESPONSE_TOO_LARGE", {{"limit", "max_body_bytes"}}));
  }
  if (over) whole_body_.resize(body_limit_);
  bytes_received_ += whole_body_.size();
  egress::v1::FetchResponse& answer = caller_.Response();
  answer.set_body_truncated(over);
  answer.set_body(std::move(whole_body_));
  ToProto(absl::Now() - start_, answer.mutable_timing()->mutable_total());
  Answer();
}

// Fetch: a caller that leaves max_body_bytes at 0 is answered within what a default gRPC
// client accepts (kDefaultClientMessageBytes), or within limits.default_max_body_bytes and
// the same room where the operator raised it: response headers as large as
// transport.max_response_header_bytes allows could otherwise push an answer past it,
// which egressd would count OK and the caller's gRPC refuse.
void FetchCall::Answer() {
  const uint64_t bound = std::max(kDefaultClientMessageBytes,
                                  config_->limits.default_max_body_bytes + kAnswerRoomBytes);
  const egress::v1::FetchResponse& answer = caller_.Response();
  const uint64_t size = answer.ByteSizeLong();
  if (max_body_bytes_ == 0 && size > bound) {
    return Complete(transport::WithReason(
        absl::ResourceExhaustedError(absl::StrCat(
            "the answer is ", size, " bytes with its ", answer.headers_size(),
            " response headers, more than the ", bound,
            " a caller that leaves max_body_bytes at 0 is sent (what a gRPC client accepts "
            "by default); set max_body_bytes and raise the client's receive limit, or use "
            "FetchStream")),
        "RESPONSE_TOO_LARGE", {{"limit", "max_body_bytes"}}));
  }
  Complete(absl::OkStatus());
}

void FetchCall::OnSent(absl::Status status) {
  Guarded("OnWriteDone", [&] {
    ReleaseBody(std::exchange(chunk_bytes_, 0));  // the chunk is taken, or never will be
    if (!status.ok()) {
      body().Close();
      return Complete(std::move(status));
    }
    body().Read(kStreamChunkBytes, [this](absl::StatusOr<std::string> bytes) {
      Guarded("OnBody", [&] { OnStreamBody(std::move(bytes)); });
    });
  });
}

void FetchCall::OnStreamBody(absl::StatusOr<std::string> bytes) {
  if (!bytes.ok()) return Complete(bytes.status());
  if (bytes->empty()) return Complete(absl::OkStatus());
  // The one chunk in hand, counted until it is taken.
  if (auto status = ReserveBody(bytes->size()); !status.ok()) {
    body().Close();
    return Complete(status);
  }
  chunk_bytes_ = bytes->size();
  bytes_received_ += chunk_bytes_;
  caller_.SendBody(*std::move(bytes));  // OnSent follows
}

absl::Status FetchCall::ReserveBody(uint64_t bytes) {
  const uint64_t limit = config_->limits.buffered_body_budget_bytes;
  if (!service_->body_budget.TryReserve(bytes, limit)) return BodyBudgetExhausted(limit);
  reserved_ += bytes;
  return absl::OkStatus();
}

void FetchCall::ReleaseBody(uint64_t bytes) {
  service_->body_budget.Release(bytes);
  reserved_ -= bytes;
}

void FetchCall::KeepBody(std::unique_ptr<transport::ResponseBody> body) {
  // What the body's end cost the caller (a drain), and what the log says of it.
  body->OnSettled([line = log_line_, observer = &service_->observer,
                   caller = caller_id_](const transport::BodySettlement& settlement) {
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

void FetchCall::Complete(absl::Status status) {
  if (cancelled() && status.ok()) status = absl::CancelledError("the caller cancelled the request");
  Report(std::move(status));
  Unref();
}

// Messages may quote upstream bytes (a Location, a header): escaped here, for every
// message, so that each is valid UTF-8. The reason is decoded here, once, for the answer
// and the log line.
void FetchCall::Report(const absl::Status& status) {
  if (reported_.exchange(true)) return;  // an exception came after the call was finished
  std::string message(status.message());
  if (status.code() == absl::StatusCode::kDeadlineExceeded && deadline_capped_) {
    absl::StrAppend(&message, " (egress ends every fetch after ",
                    absl::FormatDuration(config_->limits.max_timeout), ": limits.max_timeout)");
  }
  const absl::Status final_status = WithMessage(status, EscapeNonUtf8(message));
  transport::ErrorReason reason = ReasonOrDefault(final_status);
  // The error's ErrorInfo names the fetch's trace.
  if (!status.ok() && !trace_.trace_id.empty()) {
    reason.metadata.emplace_back("trace_id", trace_.trace_id);
  }
  const grpc::Status answer = ToGrpcStatus(final_status, reason);
  const absl::Duration total = absl::Now() - start_;
  service_->observer.OnFetchDone(answer.error_code(), total);
  CallerCost cost;
  cost.fetches = 1;
  cost.request_bytes = request_bytes_;
  cost.response_bytes = bytes_received_;
  cost.connections_opened = connections_opened_;
  cost.tls_handshakes = tls_handshakes_;
  service_->observer.OnCallerCost(caller_id_, cost);
  if (log_line_) FinishLogLine(final_status, reason, GrpcCodeName(answer.error_code()), total);
  // The caller's place frees before its answer leaves: a caller that fetches one at a
  // time must not meet its own last fetch (Done may come well after the answer).
  if (caller_counted_) service_->caller_counts.Release(caller_id_);
  quota_lease_.Reset();
  caller_.Finish(answer);
}

void FetchCall::StartLogLine(AccessLog& log, const FetchRequest& request) {
  log_line_ = std::make_shared<AccessLogLine>(log, config_->access_log);
  egress::v1::AccessLogEntry& entry = log_line_->entry;
  ToProto(start_, entry.mutable_time());
  entry.set_rpc(rpc_ == Rpc::kFetch ? "Fetch" : "FetchStream");
  entry.set_peer(caller_.Peer());
  entry.set_method(request.method().empty() ? "GET" : AccessLog::LoggedText(request.method()));
  entry.set_trace_id(trace_.trace_id);
  entry.set_span_id(trace_.span_id);
  entry.set_parent_span_id(trace_.parent_id);
}

// What the access log says of a hop's response: the last hop's stays, and the report-only
// rules of every hop.
void FetchCall::NoteResponse(const Response& response) {
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

void FetchCall::NoteWouldDeny(const std::vector<std::string>& rules) {
  if (!log_line_) return;
  auto* logged = log_line_->entry.mutable_would_deny_rules();
  for (const auto& rule : rules) {
    if (std::find(logged->begin(), logged->end(), rule) == logged->end()) *logged->Add() = rule;
  }
}

void FetchCall::FinishLogLine(const absl::Status& status, const transport::ErrorReason& reason,
                              absl::string_view code, absl::Duration total) {
  egress::v1::AccessLogEntry& entry = log_line_->entry;
  entry.set_url(AccessLog::LoggedUrl(url_, config_->access_log.log_query));
  entry.set_grpc_code(std::string(code));
  entry.set_bytes_received(bytes_received_);
  entry.set_redirects(redirects_);
  ToProto(total, entry.mutable_timing()->mutable_total());
  if (!status.ok()) {
    entry.set_error_reason(reason.reason);
    entry.set_error_message(AccessLog::LoggedMessage(status, config_->access_log.log_query));
  }
  if (reason.reason == "POLICY_DENIED") {
    entry.set_policy_decision("deny");
    for (const auto& [key, value] : reason.metadata) {
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

// An exception reached a boundary: logged, the body (if any) closed, and the call
// finished with INTERNAL unless it already was.
void FetchCall::Abandon(const char* where, const char* what) {
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

absl::Status FetchCall::Internal(const char* where) {
  return absl::InternalError(absl::StrCat("egress failed internally (in ", where,
                                          "); the fetch was abandoned, it may be retried"));
}

void FetchCall::Unref() {
  if (refs_.fetch_sub(1) == 1) caller_.Release();
}

}  // namespace egress::fetch
