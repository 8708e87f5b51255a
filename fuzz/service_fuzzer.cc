// The caller-side fuzzer: arbitrary FetchRequests through the real gRPC front end
// (FetchService's Fetch and FetchStream reactors, config limits, status mapping) over an
// in-process channel, against the real transport and a misbehaving loopback upstream
// (tests/support/fault_server). Up to four RPCs per input run at once; a stream may be
// cancelled by its caller part-way. It checks that
//   - every RPC ends (the server's own deadline ends it; a call still open 5 s past
//     it is a hang) and the codes are ones the contract names,
//   - afterwards no fetch is in flight and no connection is connecting, active or
//     draining, no request waits, and connections opened = closed + idle.
// Hosts are IP literals only (loopback, and addresses the egress policy denies before
// any connection), so no input makes a DNS query or leaves the machine; tools/fuzz.sh
// runs it in a network namespace with only loopback up besides.
#include <fuzzer/FuzzedDataProvider.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "egress/v1/egress.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "service/config/config.h"
#include "service/config/config_store.h"
#include "service/fetch/fetch_service.h"
#include "fuzz/in_process_egress.h"
#include "tests/support/counting_observer.h"
#include "tests/support/fault_server.h"

namespace {

using egress::v1::FetchRequest;

constexpr int kMaxRpcs = 4;
constexpr int kMaxDeadlineMs = 400;

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "service_fuzzer: %s\n", what.c_str());
  std::abort();
}

struct World {
  egress::testing::FaultServer upstream;
  egress::testing::CountingObserver observer;
  egress::fuzz::InProcessEgress egress;
};

World& TheWorld() {
  static World* world = [] {
    auto* w = new World;
    egress::v1::Config proto;
    proto.mutable_policy()->add_allow_cidrs("127.0.0.1/32");  // the fault server only
    proto.mutable_transport()->set_io_threads(1);
    proto.mutable_transport()->mutable_response_header_timeout()->set_nanos(200'000'000);
    proto.mutable_limits()->set_default_max_body_bytes(64 * 1024);
    proto.mutable_limits()->set_max_concurrent_fetches(3);  // below kMaxRpcs: reachable
    proto.mutable_limits()->set_max_request_header_bytes(4096);
    proto.mutable_limits()->set_max_request_body_bytes(4096);
    const absl::Status started =
        egress::fuzz::StartInProcessEgress(proto, w->observer, /*log=*/nullptr, w->egress);
    if (!started.ok()) Fail(started.ToString());
    return w;
  }();
  return *world;
}

// Arbitrary ASCII (CR, LF and NUL included): proto3 string fields must be UTF-8, and a
// client library refuses anything else before egress sees it.
std::string Text(FuzzedDataProvider& in, size_t max_length) {
  std::string text = in.ConsumeRandomLengthString(max_length);
  for (char& c : text) c &= 0x7f;
  return text;
}

std::string Url(FuzzedDataProvider& in, const World& world) {
  static const char* const kPaths[] = {
      "/ok",        "/long-body", "/reset-body",  "/short-body",     "/bad-chunk",
      "/huge-headers", "/bad-status", "/low-status", "/bad-header", "/reset-headers",
      "/close-idle", "/close-on-reuse", "/never",  "/slow-body",      "/nothing-here"};
  const int ports[] = {world.upstream.port(), world.upstream.silent_port(),
                       world.upstream.garbage_port(), 1};
  static const char* const kHosts[] = {"127.0.0.1", "[::1]", "169.254.169.254", "10.1.2.3",
                                       "0.0.0.0"};
  const char* scheme = in.ConsumeBool() ? "https" : "http";
  // Mostly the fault server's HTTP port on 127.0.0.1.
  const char* host = in.ConsumeBool() ? kHosts[in.ConsumeIntegralInRange<size_t>(1, 4)] : kHosts[0];
  const int port = in.ConsumeBool() ? ports[in.ConsumeIntegralInRange<size_t>(1, 3)] : ports[0];
  // The path starts with "/": whatever follows cannot change the authority.
  std::string path = kPaths[in.ConsumeIntegralInRange<size_t>(0, std::size(kPaths) - 1)];
  if (in.ConsumeBool()) path = absl::StrCat("/", Text(in, 64));
  return absl::StrCat(scheme, "://", host, ":", port, path);
}

FetchRequest MakeFetchRequest(FuzzedDataProvider& in, const World& world) {
  static const char* const kMethods[] = {"",       "GET",     "HEAD",  "POST", "PUT",
                                         "DELETE", "OPTIONS", "TRACE", "PATCH", "CONNECT"};
  FetchRequest request;
  request.set_method(in.ConsumeBool()
                         ? kMethods[in.ConsumeIntegralInRange<size_t>(0, std::size(kMethods) - 1)]
                         : Text(in, 16));
  request.set_url(in.ConsumeBool() ? Url(in, world) : Text(in, 128));
  for (int h = in.ConsumeIntegralInRange(0, 4); h > 0; --h) {
    auto* header = request.add_headers();
    header->set_name(Text(in, 32));
    header->set_value(in.ConsumeBool() ? Text(in, 64)
                                       : std::string(in.ConsumeIntegralInRange(0, 8192), 'v'));
  }
  if (in.ConsumeBool()) {
    request.set_body(in.ConsumeBool() ? in.ConsumeRandomLengthString(64)
                                      : std::string(in.ConsumeIntegralInRange(0, 8192), 'b'));
  }
  // Values outside the enum too: a newer client's, or garbage.
  request.set_body_mode(static_cast<egress::v1::BodyMode>(in.ConsumeIntegralInRange(-1, 4)));
  request.set_max_body_bytes(in.ConsumeBool() ? in.ConsumeIntegral<uint64_t>()
                                              : in.ConsumeIntegralInRange<uint64_t>(0, 200000));
  if (in.ConsumeBool()) {
    request.mutable_timeout()->set_seconds(in.ConsumeIntegralInRange<int64_t>(-1, 0));
    request.mutable_timeout()->set_nanos(in.ConsumeIntegral<int32_t>());
  }
  request.set_follow_redirects(in.ConsumeBool());
  return request;
}

bool ContractCode(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
    case grpc::StatusCode::CANCELLED:  // a stream its caller cancelled
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return true;
    default:
      return false;
  }
}

// One RPC, on its own thread; `cancel_after` chunks of a stream (-1: read it all).
void Call(World& world, FetchRequest request, bool stream, int cancel_after, int deadline_ms) {
  grpc::ClientContext context;
  const auto deadline = std::chrono::system_clock::now() + std::chrono::milliseconds(deadline_ms);
  context.set_deadline(deadline);
  grpc::Status status;
  if (!stream) {
    egress::v1::FetchResponse response;
    status = world.egress.stub->Fetch(&context, request, &response);
  } else {
    auto reader = world.egress.stub->FetchStream(&context, request);
    egress::v1::FetchChunk chunk;
    for (int chunks = 0; reader->Read(&chunk); ++chunks) {
      if (chunks == cancel_after) context.TryCancel();
    }
    status = reader->Finish();
  }
  if (std::chrono::system_clock::now() > deadline + std::chrono::seconds(5)) {
    Fail(absl::StrCat("an RPC ended 5 s after its deadline: ", request.ShortDebugString()));
  }
  if (!ContractCode(status.error_code())) {
    Fail(absl::StrCat("code ", status.error_code(), " (", status.error_message(),
                      ") is not one the contract names, for ", request.ShortDebugString()));
  }
}

void CheckSettles(World& world) {
  const absl::Time give_up = absl::Now() + absl::Seconds(5);
  for (;;) {
    int busy = 0, idle = 0;
    for (const auto& o : world.egress.transport->PoolStats()) {
      busy += o.connecting + o.active + o.draining + o.waiting;
      idle += o.idle;
    }
    const uint32_t in_flight = world.egress.service->fetches_in_flight();
    if (busy == 0 && in_flight == 0) {
      const int open = world.observer.opened - world.observer.AllClosed();
      if (open != idle) {
        Fail(absl::StrCat("counts do not balance: opened - closed = ", open, " but ", idle,
                          " idle in the pool"));
      }
      return;
    }
    if (absl::Now() > give_up) {
      Fail(absl::StrCat(in_flight, " fetches in flight and ", busy,
                        " connections or waits 5 s after every RPC ended"));
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  World& world = TheWorld();
  FuzzedDataProvider in(data, size);
  std::vector<std::thread> calls;
  for (int rpcs = in.ConsumeIntegralInRange(1, kMaxRpcs); rpcs > 0; --rpcs) {
    FetchRequest request = MakeFetchRequest(in, world);
    const bool stream = in.ConsumeBool();
    const int cancel_after = in.ConsumeIntegralInRange(-1, 2);
    const int deadline_ms = in.ConsumeIntegralInRange(1, kMaxDeadlineMs);
    calls.emplace_back(Call, std::ref(world), std::move(request), stream, cancel_after,
                       deadline_ms);
  }
  for (auto& call : calls) call.join();
  CheckSettles(world);
  return 0;
}
