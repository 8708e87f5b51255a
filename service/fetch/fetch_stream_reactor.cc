#include "service/fetch/fetch_stream_reactor.h"

#include <cstdint>
#include <string>
#include <utility>

#include "service/fetch/fetch_call.h"
#include "service/fetch/response_mapping.h"
#include "service/fetch/stalled_write_watch.h"

namespace egress::fetch {
namespace {

using egress::v1::FetchChunk;

// FetchStream: the head, then body chunks as fast as the caller takes them. A caller
// that goes away leaves the rest of the body to auto-drain.
class FetchStreamReactor final : public grpc::ServerWriteReactor<FetchChunk>,
                                 private ExchangeReactor<FetchStreamReactor> {
 public:
  FetchStreamReactor(const Context& service, grpc::CallbackServerContext* context,
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

}  // namespace

grpc::ServerWriteReactor<FetchChunk>* NewFetchStreamReactor(const Context& service,
                                                             grpc::CallbackServerContext* context,
                                                             FetchRequest* request) {
  return new FetchStreamReactor(service, context, request);
}

}  // namespace egress::fetch
