#include "service/fetch/fetch_service.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <iterator>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "boost/url/parse.hpp"
#include "boost/url/url.hpp"
#include "google/protobuf/arena.h"
#include "grpc/grpc_security_constants.h"
#include "grpcpp/alarm.h"
#include <mutex>
#include "service/access_log/access_log.h"
#include "service/fetch/peer_address.h"
#include "service/config/proto_time.h"
#include "service/fetch/status_mapping.h"
#include "service/fetch/trace_context.h"
#include "service/transport/error_reason.h"
#include "service/fetch/utf8_text.h"

namespace egress {
namespace {

using egress::v1::FetchChunk;
using egress::v1::FetchRequest;
using egress::v1::FetchResponse;
using transport::Response;

constexpr size_t kStreamChunkBytes = 64 * 1024;

// `status` with another message, its code and payloads (the error's reason) kept.
absl::Status WithMessage(const absl::Status& status, absl::string_view message) {
  absl::Status result(status.code(), message);
  status.ForEachPayload(
      [&](absl::string_view url, const absl::Cord& payload) { result.SetPayload(url, payload); });
  return result;
}

// A request header's value: value_bytes carries what a proto3 string cannot (e.g.
// Latin-1), and wins when set.
const std::string& ValueOf(const egress::v1::Header& header) {
  return header.value_bytes().empty() ? header.value() : header.value_bytes();
}

// The first value of a request header (case-insensitive name), or empty.
std::string HeaderValue(const FetchRequest& request, absl::string_view name) {
  for (const auto& header : request.headers()) {
    if (absl::EqualsIgnoreCase(header.name(), name)) return ValueOf(header);
  }
  return "";
}

// egressd's span of this fetch: a child of the caller's trace context, from its gRPC
// metadata, or else from the request's own headers (a caller that does not propagate
// over gRPC); a new trace when neither holds a valid one.
TraceContext FetchSpan(const grpc::CallbackServerContext& context, const FetchRequest& request) {
  const auto& metadata = context.client_metadata();
  const auto parent = metadata.find("traceparent");
  if (parent == metadata.end()) {
    return ChildSpan(HeaderValue(request, "traceparent"), HeaderValue(request, "tracestate"));
  }
  const auto state = metadata.find("tracestate");
  return ChildSpan(absl::string_view(parent->second.data(), parent->second.size()),
                   state == metadata.end()
                       ? absl::string_view()
                       : absl::string_view(state->second.data(), state->second.size()));
}

// The upstream gets egressd's span as its parent, in place of any trace headers the
// caller put in the request.
void SetTraceHeaders(const TraceContext& span, transport::HeaderList* headers) {
  headers->erase(std::remove_if(headers->begin(), headers->end(),
                                [](const auto& header) {
                                  return absl::EqualsIgnoreCase(header.first, "traceparent") ||
                                         absl::EqualsIgnoreCase(header.first, "tracestate");
                                }),
                 headers->end());
  headers->emplace_back("traceparent", span.ToTraceParent());
  if (!span.tracestate.empty()) headers->emplace_back("tracestate", span.tracestate);
}

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
  AccessLogLine(AccessLog& log, const AccessLogSettings& settings)
      : arena_(FirstBlock(first_block_, sizeof first_block_)),
        entry(*google::protobuf::Arena::CreateMessage<egress::v1::AccessLogEntry>(&arena_)),
        log_(log),
        settings_(settings) {}
  ~AccessLogLine() {
    entry.set_drain(drain.empty() ? "none" : drain);
    entry.set_drained_bytes(drained_bytes);
    log_.Submit(entry, settings_);
  }

  egress::v1::AccessLogEntry& entry;  // the reactor's part
  std::string drain;                  // the settlement's part
  uint64_t drained_bytes = 0;

 private:
  static google::protobuf::ArenaOptions FirstBlock(char* block, size_t size) {
    google::protobuf::ArenaOptions options;
    options.initial_block = block;
    options.initial_block_size = size;
    return options;
  }

  AccessLog& log_;
  const AccessLogSettings settings_;
};

// What a fetch that cannot reserve body bytes under limits.buffered_body_budget_bytes
// finishes with, whichever protocol it holds them for.
absl::Status BodyBudgetExhausted(uint64_t limit) {
  return transport::WithReason(
      absl::ResourceExhaustedError(absl::StrCat(
          "egress is holding its limit of ", limit,
          " response body bytes for all fetches together "
          "(limits.buffered_body_budget_bytes); retry with backoff, or ask for fewer bytes")),
      "BODY_BUDGET_EXHAUSTED", {{"limit", "limits.buffered_body_budget_bytes"}},
      transport::kRetryAfterLoad);
}

// The transport's charge for a fetch's body bytes (its HTTP/2 stream's window), from the
// same budget and with the same refusal as the bytes the reactor holds itself, so that
// egress_buffered_body_bytes counts both. It may outlive the reactor (a stream ends on
// its loop after the RPC): it holds the service's budget, which outlives the transport.
class BudgetedBodyMemory final : public transport::BodyMemory {
 public:
  BudgetedBodyMemory(BodyBudget& budget, uint64_t limit) : budget_(budget), limit_(limit) {}

  absl::Status TryReserve(uint64_t bytes) override {
    return budget_.TryReserve(bytes, limit_) ? absl::OkStatus() : BodyBudgetExhausted(limit_);
  }
  void Release(uint64_t bytes) override { budget_.Release(bytes); }

 private:
  BodyBudget& budget_;
  const uint64_t limit_;  // of the config the fetch started under
};

// Takes the body out of `request` (it is held once, in the HttpRequest, from here on).
absl::StatusOr<transport::HttpRequest> ToHttpRequest(FetchRequest& request,
                                                      const FetchLimits& limits) {
  if (request.body().size() > limits.max_request_body_bytes) {
    return transport::WithReason(
        absl::ResourceExhaustedError(absl::StrCat(
            "request body of ", request.body().size(), " bytes exceeds the limit of ",
            limits.max_request_body_bytes, " bytes (limits.max_request_body_bytes)")),
        "REQUEST_TOO_LARGE", {{"limit", "limits.max_request_body_bytes"}});
  }
  transport::HeaderList headers;
  headers.reserve(request.headers_size());
  size_t header_bytes = 0;
  for (const auto& header : request.headers()) {
    const std::string& value = ValueOf(header);
    header_bytes += header.name().size() + value.size() + 4;  // ": " and CRLF
    headers.emplace_back(header.name(), value);
  }
  if (header_bytes > limits.max_request_header_bytes) {
    return transport::WithReason(
        absl::ResourceExhaustedError(absl::StrCat(
            "request headers of ", header_bytes, " bytes exceed the limit of ",
            limits.max_request_header_bytes, " bytes (limits.max_request_header_bytes)")),
        "REQUEST_TOO_LARGE", {{"limit", "limits.max_request_header_bytes"}});
  }
  if (request.has_timeout()) {
    if (absl::Status timeout = CheckDurations(request.timeout(), "timeout"); !timeout.ok()) {
      return timeout;
    }
  }
  if (request.max_attempts() > transport::kMaxAttempts) {
    return absl::InvalidArgumentError(absl::StrCat("max_attempts of ", request.max_attempts(),
                                                   " is above the limit of ",
                                                   transport::kMaxAttempts));
  }
  auto http_request = transport::MakeRequest(request.method(), request.url(),
                                             std::move(headers),
                                             std::move(*request.mutable_body()));
  if (http_request.ok() && request.max_attempts() > 0) {
    http_request->max_attempts = request.max_attempts();
  }
  return http_request;
}

// The sooner of the gRPC deadline and the request's timeout; the server default when
// neither is set; never later than limits.max_timeout from now (`capped` says whether
// that cap decided it).
absl::Time Deadline(const grpc::CallbackServerContext& context, const FetchRequest& request,
                    const FetchLimits& limits, bool* capped) {
  const absl::Time now = absl::Now();
  absl::Time deadline = absl::InfiniteFuture();
  const auto grpc_deadline = context.deadline();
  if (grpc_deadline < std::chrono::system_clock::now() + std::chrono::hours(24 * 365)) {
    deadline = absl::FromChrono(grpc_deadline);
  }
  if (request.has_timeout() && FromProto(request.timeout()) > absl::ZeroDuration()) {
    deadline = std::min(deadline, now + FromProto(request.timeout()));
  }
  if (deadline == absl::InfiniteFuture()) deadline = now + limits.default_timeout;
  *capped = deadline > now + limits.max_timeout;
  return std::min(deadline, now + limits.max_timeout);
}

// The first value of an AuthContext property, or empty.
std::string FirstProperty(const grpc::AuthContext& auth, const char* name) {
  for (const auto& value : auth.FindPropertyValues(name)) {
    return std::string(value.data(), value.size());
  }
  return "";
}

// The name policy.identity_source picks from the peer's mTLS client certificate; empty
// when the peer sent none (plaintext, or TLS without client certificates).
std::string CertificateIdentity(const grpc::CallbackServerContext& context,
                                const CallerPolicy& callers) {
  const auto auth = context.auth_context();
  if (!auth || !auth->IsPeerAuthenticated()) return "";
  switch (callers.identity_source) {
    case egress::v1::IDENTITY_SOURCE_DNS_SAN:
      return FirstProperty(*auth, GRPC_PEER_DNS_PROPERTY_NAME);
    case egress::v1::IDENTITY_SOURCE_COMMON_NAME:
      return FirstProperty(*auth, GRPC_X509_CN_PROPERTY_NAME);
    default:
      return FirstProperty(*auth, GRPC_PEER_URI_PROPERTY_NAME);
  }
}

// Whether caller_header may be believed from this peer: its address or its certificate
// identity is listed in policy.caller_header_trusted_peers.
bool HeaderTrusted(const grpc::CallbackServerContext& context, const CallerPolicy& callers,
                   const std::string& certificate_identity) {
  if (!certificate_identity.empty() &&
      std::find(callers.header_trusted_identities.begin(),
                callers.header_trusted_identities.end(),
                certificate_identity) != callers.header_trusted_identities.end()) {
    return true;
  }
  if (callers.header_trusted_cidrs.empty()) return false;
  const auto address = PeerAddress(context.peer());
  return address && std::any_of(callers.header_trusted_cidrs.begin(),
                                callers.header_trusted_cidrs.end(),
                                [&](const transport::Cidr& c) { return c.Contains(*address); });
}

// The caller's identity: caller_header's value when a trusted peer (a mesh proxy) sent
// it, else the name policy.identity_source picks from its mTLS client certificate;
// empty when neither says.
std::string CallerIdentity(const grpc::CallbackServerContext& context,
                           const CallerPolicy& callers) {
  std::string certificate_identity = CertificateIdentity(context, callers);
  if (!callers.caller_header.empty() && HeaderTrusted(context, callers, certificate_identity)) {
    const auto& metadata = context.client_metadata();
    const auto [first, last] = metadata.equal_range(callers.caller_header);
    if (first != last) {
      // Two values (a proxy that appends to what its client sent): which one the trusted
      // peer set cannot be told, so neither names the caller.
      if (std::next(first) != last) return "";
      return std::string(first->second.data(), first->second.size());
    }
  }
  return certificate_identity;
}

// The absolute URL a redirect response points to, if it is one.
std::optional<std::string> RedirectLocation(const Response& response) {
  const int code = response.head.status_code;
  if (code != 301 && code != 302 && code != 303 && code != 307 && code != 308) {
    return std::nullopt;
  }
  for (const auto& [name, value] : response.head.headers) {
    if (absl::EqualsIgnoreCase(name, "location")) return value;
  }
  return std::nullopt;
}

// The request for the next hop: Location resolved against the current URL; 303, and
// 301/302 after a POST, become a GET without a body (as browsers and Go do). A hop to
// another origin (scheme, host or port) goes without the headers in `strip_headers`
// (lower-case names), so that credentials reach only the origin they were meant for;
// once dropped they stay dropped, even on a hop back.
absl::StatusOr<transport::HttpRequest> NextHop(const transport::HttpRequest& current,
                                               const std::string& current_url,
                                               std::string& location, int status_code,
                                               const std::vector<std::string>& strip_headers) {
  auto base = boost::urls::parse_uri(current_url);
  auto reference = boost::urls::parse_uri_reference(location);
  if (!base || !reference) {
    return transport::WithReason(
        transport::UrlError(absl::StatusCode::kUnavailable,
                            "upstream redirected to an invalid Location ", location, ""),
        "INVALID_REDIRECT");
  }
  boost::urls::url resolved;
  if (auto result = boost::urls::resolve(*base, *reference, resolved); !result) {
    return transport::WithReason(
        transport::UrlError(absl::StatusCode::kUnavailable, "cannot resolve redirect Location ",
                            location, ""),
        "INVALID_REDIRECT");
  }
  location = std::string(resolved.buffer());
  const bool to_get = status_code == 303 || ((status_code == 301 || status_code == 302) &&
                                             current.method == "POST");
  auto next = transport::MakeRequest(to_get ? "GET" : current.method, location,
                                     current.headers,
                                     to_get ? transport::RequestBody() : current.body);
  if (!next.ok()) return next.status();
  if (!(next->origin == current.origin)) {
    auto& headers = next->headers;
    headers.erase(std::remove_if(headers.begin(), headers.end(),
                                 [&](const auto& header) {
                                   return std::find(strip_headers.begin(), strip_headers.end(),
                                                    absl::AsciiStrToLower(header.first)) !=
                                          strip_headers.end();
                                 }),
                  headers.end());
  }
  next->caller = current.caller;
  next->body_memory = current.body_memory;
  return next;
}

// A header value as the contract carries it: text when it is UTF-8, else the exact bytes
// in value_bytes and their ISO-8859-1 reading in value.
void SetHeaderValue(const std::string& value, egress::v1::Header* header) {
  if (IsUtf8(value)) {
    header->set_value(value);
    return;
  }
  header->set_value(Latin1ToUtf8(value));
  header->set_value_bytes(value);
}

void FillTiming(const transport::ConnectionDetails& c, absl::Duration total,
                egress::v1::Timing* timing) {
  ToProto(c.dial.dns, timing->mutable_dns());
  ToProto(c.dial.connect, timing->mutable_connect());
  ToProto(c.dial.tls_handshake, timing->mutable_tls_handshake());
  ToProto(c.time_to_first_byte, timing->mutable_time_to_first_byte());
  ToProto(total, timing->mutable_total());
}

// Status, headers, connection info, timing and trace: everything but the body.
void FillHead(const Response& response, absl::Time start, const TraceContext& trace,
              FetchResponse* out) {
  out->set_status_code(response.head.status_code);
  for (const auto& [name, value] : response.head.headers) {
    auto* header = out->add_headers();
    header->set_name(name);  // a token (the parser checks): ASCII
    SetHeaderValue(value, header);
  }
  const transport::ConnectionDetails& c = response.connection;
  auto* info = out->mutable_connection();
  info->set_reused(c.reused);
  info->set_was_idle(c.was_idle);
  ToProto(c.idle_time, info->mutable_idle_time());
  info->set_connection_id(c.connection_id);
  info->set_remote_address(c.remote_address);
  info->set_protocol(c.protocol);
  FillTiming(c, absl::Now() - start, out->mutable_timing());
  out->set_trace_id(trace.trace_id);
  out->set_span_id(trace.span_id);
}

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
  void Start(const FetchService::Context& service, std::shared_ptr<const ServiceConfig> config,
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
    const FetchService::Context& service = *service_;
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
    const absl::Status final_status = WithTraceId(WithMessage(status, EscapeNonUtf8(message)));
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

  // The error's ErrorInfo names the fetch's trace.
  absl::Status WithTraceId(absl::Status status) const {
    if (status.ok()) return status;
    transport::ErrorReason reason = transport::ReasonOf(status).value_or(
        transport::ErrorReason{ReasonFor(status), {}, std::nullopt});
    reason.metadata.emplace_back("trace_id", trace_.trace_id);
    return transport::WithReason(std::move(status), reason);
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

  const FetchService::Context* service_ = nullptr;
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

// Fetch: reads the body per body_mode, then finishes; unread bytes are left to drain.
class FetchReactor final : public grpc::ServerUnaryReactor,
                           private ExchangeReactor<FetchReactor> {
 public:
  FetchReactor(const FetchService::Context& service, grpc::CallbackServerContext* context,
               FetchRequest* request, FetchResponse* response)
      : request_(*request), response_(response) {
    auto config = service.config.Get();
    const uint64_t max = request->max_body_bytes();
    switch (request->body_mode()) {
      case egress::v1::BODY_MODE_NONE: body_limit_ = 0; break;
      case egress::v1::BODY_MODE_PREFIX: body_limit_ = max; break;
      default: body_limit_ = max ? max : config->limits.default_max_body_bytes; break;
    }
    Start(service, std::move(config), *context, *request);
  }

  void OnCancel() override { CancelExchange(); }
  void OnDone() override { Done(); }
  // Both reactions are short and never wait (a lock held for a few lines, a post to an
  // I/O thread), so gRPC may run them on the thread that ends the call instead of
  // waking its executor for them: one thread hand-off less per fetch (issue 15).
  bool InternalInlineable() override { return true; }

 private:
  friend class ExchangeReactor<FetchReactor>;
  static constexpr char kRpcName[] = "Fetch";
  // A caller may not make egress hold more than the ceiling for it. INVALID_ARGUMENT,
  // not RESOURCE_EXHAUSTED: the same request fails the same way whatever the load, so
  // retrying cannot help; the budget (limits.buffered_body_budget_bytes) is what says
  // "not now".
  absl::Status Admit(const FetchRequest& request) {
    const uint64_t ceiling = config_->limits.max_body_bytes_ceiling;
    if (request.body_mode() == egress::v1::BODY_MODE_NONE || request.max_body_bytes() <= ceiling) {
      return absl::OkStatus();
    }
    return transport::WithReason(
        absl::InvalidArgumentError(absl::StrCat(
            "max_body_bytes of ", request.max_body_bytes(), " is above the limit of ", ceiling,
            " bytes (limits.max_body_bytes_ceiling); ask for at most that, or read the body "
            "with FetchStream")),
        "MAX_BODY_BYTES_ABOVE_CEILING", {{"limit", "limits.max_body_bytes_ceiling"}});
  }

  void OnResponse(absl::StatusOr<Response> response) {
    if (!response.ok()) return Complete(response.status());
    FillHead(*response, start_, trace_, response_);
    KeepBody(std::move(response->body));
    if (body_limit_ == 0 && request_.body_mode() != egress::v1::BODY_MODE_PREFIX) {
      body().Close();  // BODY_MODE_NONE: the rest is left to auto-drain
      return Answer();
    }
    ReadMore();
  }

  // Reads up to one byte past the limit: that byte tells "larger" from "exactly".
  void ReadMore() {
    const uint64_t wanted = body_limit_ + 1 - body_.size();
    body().Read(static_cast<size_t>(std::min<uint64_t>(wanted, kStreamChunkBytes)),
                [this](absl::StatusOr<std::string> bytes) {
                  Guarded("OnBody", [&] { OnBody(std::move(bytes)); });
                });
  }

  void OnBody(absl::StatusOr<std::string> bytes) {
    if (!bytes.ok()) return Complete(bytes.status());
    // The byte past the limit only tells "larger" from "exactly": it is not kept.
    const uint64_t kept = std::min<uint64_t>(bytes->size(), body_limit_ - body_.size());
    if (auto status = ReserveBody(kept); !status.ok()) {
      body().Close();
      return Complete(status);
    }
    const bool ended = bytes->empty();
    body_.append(*bytes);
    if (!ended && body_.size() <= body_limit_) return ReadMore();

    body().Close();
    const bool over = body_.size() > body_limit_;
    if (over && request_.body_mode() != egress::v1::BODY_MODE_PREFIX) {
      return Complete(transport::WithReason(
          absl::ResourceExhaustedError(absl::StrCat(
              "response body is larger than max_body_bytes (", body_limit_,
              " bytes); raise max_body_bytes, or use BODY_MODE_PREFIX or FetchStream to read "
              "part of it")),
          "RESPONSE_TOO_LARGE", {{"limit", "max_body_bytes"}}));
    }
    if (over) body_.resize(body_limit_);
    CountBodyBytes(body_.size());
    response_->set_body_truncated(over);
    response_->set_body(std::move(body_));
    ToProto(absl::Now() - start_, response_->mutable_timing()->mutable_total());
    Answer();
  }

  // A caller that leaves max_body_bytes at 0 is answered within what a default gRPC client
  // accepts (kDefaultClientMessageBytes), or within limits.default_max_body_bytes and the
  // same room where the operator raised it: response headers as large as
  // transport.max_response_header_bytes allows could otherwise push an answer past it,
  // which egressd would count OK and the caller's gRPC refuse.
  void Answer() {
    const uint64_t bound = std::max(kDefaultClientMessageBytes,
                                    config_->limits.default_max_body_bytes + kAnswerRoomBytes);
    const uint64_t size = response_->ByteSizeLong();
    if (request_.max_body_bytes() == 0 && size > bound) {
      return Complete(transport::WithReason(
          absl::ResourceExhaustedError(absl::StrCat(
              "the answer is ", size, " bytes with its ", response_->headers_size(),
              " response headers, more than the ", bound,
              " a caller that leaves max_body_bytes at 0 is sent (what a gRPC client accepts "
              "by default); set max_body_bytes and raise the client's receive limit, or use "
              "FetchStream")),
          "RESPONSE_TOO_LARGE", {{"limit", "max_body_bytes"}}));
    }
    Complete(absl::OkStatus());
  }

  const FetchRequest& request_;
  FetchResponse* const response_;
  uint64_t body_limit_ = 0;
  std::string body_;  // what has been read so far
};

// Ends a server stream whose caller stops taking messages: a write still waiting for the
// caller kGrace after the fetch's deadline cancels the RPC, so that the caller does not
// hold the upstream connection, a chunk of the body budget and its fetch slots until gRPC
// gives up on it. A slow upstream is the transport's deadline's (DEADLINE_EXCEEDED, with
// its reason); a caller that reads, however slowly, takes each message well within the
// grace and meets that deadline too. The state is shared with the alarm, whose callback
// may run after the reactor is gone.
class StalledWriteWatch {
 public:
  explicit StalledWriteWatch(grpc::CallbackServerContext* context)
      : state_(std::make_shared<State>()) {
    state_->context = context;
  }

  // Once, before the first write.
  void Arm(absl::Time deadline) {
    alarm_.emplace();
    alarm_->Set(absl::ToChronoTime(deadline + kGrace), [state = state_](bool fired) {
      if (!fired) return;  // the reactor is gone
      std::lock_guard<std::mutex> lock(state->mu);
      state->expired = true;
      if (!state->writing || !state->context) return;
      state->cancelled = true;
      // gRPC runs a write's completion and OnDone on its own threads, never inside
      // TryCancel: holding mu here cannot deadlock with WriteDone or Detach.
      state->context->TryCancel();
    });
  }

  // Before each write; false once the watch's time has passed (no write may start).
  bool WriteStarting() {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (state_->expired) return false;
    state_->writing = true;
    return true;
  }
  // After each write; whether the watch cancelled the RPC while it waited.
  bool WriteDone() {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->writing = false;
    return state_->cancelled;
  }
  // In OnDone: gRPC frees the context after it.
  void Detach() {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->context = nullptr;
  }

  // The status egress counts and logs (the caller sees CANCELLED).
  static absl::Status Stalled() {
    return absl::DeadlineExceededError(absl::StrCat(
        "deadline expired with a message of the stream still to be written to the caller ",
        absl::FormatDuration(kGrace), " past it; the stream was cancelled and the upstream "
        "connection let go"));
  }

 private:
  static constexpr absl::Duration kGrace = absl::Seconds(1);

  struct State {
    std::mutex mu;
    grpc::CallbackServerContext* context ABSL_GUARDED_BY(mu) = nullptr;  // null after OnDone
    bool writing ABSL_GUARDED_BY(mu) = false;    // a message waits for the caller
    bool expired ABSL_GUARDED_BY(mu) = false;    // the alarm has fired
    bool cancelled ABSL_GUARDED_BY(mu) = false;  // ... and cancelled the RPC
  };
  std::shared_ptr<State> state_;
  std::optional<grpc::Alarm> alarm_;  // made when armed: an Alarm costs a grpc_init
};

// FetchStream: the head, then body chunks as fast as the caller takes them. A caller
// that goes away leaves the rest of the body to auto-drain.
class FetchStreamReactor final : public grpc::ServerWriteReactor<FetchChunk>,
                                 private ExchangeReactor<FetchStreamReactor> {
 public:
  FetchStreamReactor(const FetchService::Context& service, grpc::CallbackServerContext* context,
                     FetchRequest* request)
      : stall_watch_(context) {
    Start(service, service.config.Get(), *context, *request);
  }

  void OnCancel() override { CancelExchange(); }
  void OnDone() override {
    stall_watch_.Detach();
    Done();
  }

  // ok is false when the caller has gone (or the stall watch cancelled it): the body is
  // let go of, to auto-drain.
  void OnWriteDone(bool ok) override {
    const bool stalled = stall_watch_.WriteDone();
    Guarded("OnWriteDone", [&] {
      ReleaseBody(std::exchange(chunk_bytes_, 0));  // the chunk is written, or never will be
      // A write that completed just as the watch cancelled the RPC ends it all the same:
      // the caller sees CANCELLED either way, and so the count and the log agree.
      if (!ok || stalled) {
        body().Close();
        if (stalled) return Complete(StalledWriteWatch::Stalled());
        return Complete(absl::CancelledError("the caller went away"));
      }
      body().Read(kStreamChunkBytes, [this](absl::StatusOr<std::string> bytes) {
        Guarded("OnBody", [&] { OnBody(std::move(bytes)); });
      });
    });
  }

 private:
  friend class ExchangeReactor<FetchStreamReactor>;
  static constexpr char kRpcName[] = "FetchStream";
  // FetchStream ignores max_body_bytes: it holds one chunk at a time.
  absl::Status Admit(const FetchRequest&) { return absl::OkStatus(); }

  void OnResponse(absl::StatusOr<Response> response) {
    if (!response.ok()) return Complete(response.status());
    FillHead(*response, start_, trace_, chunk_.mutable_head());
    KeepBody(std::move(response->body));
    stall_watch_.Arm(fetch_deadline());
    WriteChunk();
  }

  void OnBody(absl::StatusOr<std::string> bytes) {
    if (!bytes.ok()) return Complete(bytes.status());
    if (bytes->empty()) return Complete(absl::OkStatus());
    // The one chunk in hand, counted until it is written.
    if (auto status = ReserveBody(bytes->size()); !status.ok()) {
      body().Close();
      return Complete(status);
    }
    chunk_bytes_ = bytes->size();
    CountBodyBytes(chunk_bytes_);
    chunk_.set_body(*std::move(bytes));
    WriteChunk();
  }

  void WriteChunk() {
    if (!stall_watch_.WriteStarting()) {
      body().Close();
      return Complete(StalledWriteWatch::Stalled());
    }
    StartWrite(&chunk_);
  }

  FetchChunk chunk_;  // the message being written; one write at a time
  uint64_t chunk_bytes_ = 0;  // body bytes in chunk_, reserved from the budget
  StalledWriteWatch stall_watch_;
};

// gRPC's callback handlers build the request as a mutable object the call owns and lend
// it as const (grpcpp/impl/codegen/server_callback_handlers.h; the unary one hands the
// same object out mutable through GetRpcAllocatorState). Egress moves the body out of it
// rather than hold a second copy of up to limits.max_request_body_bytes per call.
FetchRequest* OwnedRequest(const FetchRequest* request) {
  return const_cast<FetchRequest*>(request);
}

}  // namespace

grpc::ServerUnaryReactor* FetchService::Fetch(grpc::CallbackServerContext* context,
                                              const FetchRequest* request,
                                              FetchResponse* response) {
  return new FetchReactor(context_, context, OwnedRequest(request), response);
}

grpc::ServerWriteReactor<FetchChunk>* FetchService::FetchStream(
    grpc::CallbackServerContext* context, const FetchRequest* request) {
  return new FetchStreamReactor(context_, context, OwnedRequest(request));
}

}  // namespace egress
