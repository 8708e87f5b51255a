#include "service/fetch/fetch_reactor.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "service/config/proto_time.h"
#include "service/fetch/fetch_call.h"
#include "service/fetch/response_mapping.h"
#include "service/base/error_reason.h"

namespace egress::fetch {
namespace {

using egress::v1::FetchResponse;

// Fetch: reads the body per body_mode, then finishes; unread bytes are left to drain.
class FetchReactor final : public grpc::ServerUnaryReactor,
                           private ExchangeReactor<FetchReactor> {
 public:
  FetchReactor(const Context& service, grpc::CallbackServerContext* context,
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

}  // namespace

grpc::ServerUnaryReactor* NewFetchReactor(const Context& service,
                                          grpc::CallbackServerContext* context,
                                          FetchRequest* request, FetchResponse* response) {
  return new FetchReactor(service, context, request, response);
}

}  // namespace egress::fetch
