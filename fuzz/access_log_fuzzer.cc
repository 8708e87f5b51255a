// The access log's redaction through the gRPC front end: FetchService (the in-process
// server service_fuzzer drives) with an access log in a file and access_log.log_query
// off, against tests/support/fault_server on loopback. Each input makes 1-3 RPCs (Fetch
// or FetchStream) whose URL holds a secret marker in its userinfo, query or fragment
// (fuzz/secret_urls.h), or points to /redirect-to, whose 302 sends a generated Location
// holding the marker (followed); header values hold the marker too. Once every RPC has
// ended and its line is written, no line of the log may hold the marker.
// Hosts are IP literals (no DNS); tools/fuzz.sh runs it in a network namespace with only
// loopback up.
#include <fuzzer/FuzzedDataProvider.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "egress/v1/egress.grpc.pb.h"
#include "fuzz/secret_urls.h"
#include "grpcpp/grpcpp.h"
#include "service/access_log/access_log.h"
#include "service/config/config.h"
#include "service/config/config_store.h"
#include "service/fetch/fetch_service.h"
#include "fuzz/in_process_egress.h"
#include "tests/support/counting_observer.h"
#include "tests/support/fault_server.h"

namespace {

using egress::v1::FetchRequest;

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "access_log_fuzzer: %s\n", what.c_str());
  std::abort();
}

// The access log's lines, counted as they are written or dropped.
class LineCounter final : public egress::AccessLogObserver {
 public:
  void OnAccessLogWritten(uint64_t lines) override { done += lines; }
  void OnAccessLogDropped(egress::AccessLogDrop, uint64_t lines) override { done += lines; }
  std::atomic<uint64_t> done{0};
};

struct World {
  egress::testing::FaultServer upstream;
  egress::testing::CountingObserver observer;
  LineCounter lines;
  std::string log_path;
  std::unique_ptr<egress::AccessLog> log;
  egress::fuzz::InProcessEgress egress;
  size_t log_read = 0;  // bytes of the log checked so far
};

World& TheWorld() {
  static World* world = [] {
    auto* w = new World;
    w->log_path = absl::StrCat("/tmp/access_log_fuzzer.", getpid(), ".log");
    auto log = egress::AccessLog::Open(w->log_path, w->lines);
    if (!log.ok()) Fail(log.status().ToString());
    w->log = *std::move(log);
    egress::v1::Config proto;
    proto.mutable_policy()->add_allow_cidrs("127.0.0.1/32");  // the fault server only
    proto.mutable_policy()->set_max_redirects(2);
    proto.mutable_transport()->set_io_threads(1);
    proto.mutable_transport()->mutable_response_header_timeout()->set_nanos(200'000'000);
    proto.mutable_access_log()->set_log_query(false);
    const absl::Status started =
        egress::fuzz::StartInProcessEgress(proto, w->observer, w->log.get(), w->egress);
    if (!started.ok()) Fail(started.ToString());
    return w;
  }();
  return *world;
}

FetchRequest MakeFetchRequest(FuzzedDataProvider& in, const World& world) {
  static const char* const kMethods[] = {"", "GET", "POST", "HEAD", "G T"};
  static const char* const kNames[] = {"Authorization", "Cookie", "Upgrade", "Connection",
                                       "X-Api-Key"};
  FetchRequest request;
  request.set_method(kMethods[in.ConsumeIntegralInRange<size_t>(0, std::size(kMethods) - 1)]);
  if (in.ConsumeBool()) {
    // A caller's URL on the fault server (or on an address the policy denies). Userinfo
    // holds no '?' or '#': "http://ZZZ#x@h/" is host "zzz", which the log names (origin,
    // DNS errors) as any host.
    egress::fuzz::UrlShape shape;
    shape.hosts = {"127.0.0.1", "[::1]", "10.1.2.3"};
    shape.ports = {world.upstream.port(), world.upstream.garbage_port()};
    shape.paths = {"/ok", "/echo-headers", "/redirect-same-origin", "/bad-header", "/"};
    shape.ascii = true;
    shape.not_in_userinfo = "?#";
    request.set_url(egress::fuzz::SecretUrl(in, shape, /*keep_query=*/false));
  } else {
    // A Location with a secret; the caller's URL holds it in its query too.
    egress::fuzz::UrlShape shape;
    shape.ascii = true;
    shape.not_in_userinfo = "?#";
    shape.userinfo_needs_scheme = true;
    if (in.ConsumeBool()) {
      shape.hosts = {"127.0.0.1"};
      shape.ports = {world.upstream.port()};
      shape.paths = {"/ok", "/redirect-same-origin", "/"};
    }
    request.set_url(world.upstream.RedirectUrl(egress::fuzz::SecretUrl(in, shape, false)));
  }
  for (int h = in.ConsumeIntegralInRange(0, 3); h > 0; --h) {
    auto* header = request.add_headers();
    header->set_name(kNames[in.ConsumeIntegralInRange<size_t>(0, std::size(kNames) - 1)]);
    egress::fuzz::UrlShape ascii;
    ascii.ascii = true;
    header->set_value(egress::fuzz::WithSecret(in, egress::fuzz::Piece(in, 32, ascii)));
  }
  request.set_follow_redirects(!in.ConsumeBool());  // followed unless the input says
  return request;
}

void Call(World& world, FetchRequest request, bool stream, int deadline_ms) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(deadline_ms));
  if (!stream) {
    egress::v1::FetchResponse response;
    world.egress.stub->Fetch(&context, request, &response);
    return;
  }
  auto reader = world.egress.stub->FetchStream(&context, request);
  egress::v1::FetchChunk chunk;
  while (reader->Read(&chunk)) {
  }
  reader->Finish();
}

// Waits until every RPC's line is written (a line comes once its RPC has ended and its
// connection settled), then checks the lines written since the last input. Each RPC
// that reached FetchService (one whose deadline passed first did not) gives a line, and
// is counted in CountingObserver::fetches when it ends.
void CheckLog(World& world) {
  uint64_t rpcs = 0;
  for (const auto& count : world.observer.fetches) rpcs += count;
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (world.lines.done < rpcs) {
    if (absl::Now() > give_up) {
      Fail(absl::StrCat(rpcs - world.lines.done, " of ", rpcs,
                        " lines not written 10 s after their RPCs ended"));
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
  std::ifstream file(world.log_path, std::ios::binary);
  file.seekg(static_cast<std::streamoff>(world.log_read));
  std::stringstream text;
  text << file.rdbuf();
  const std::string lines = text.str();
  world.log_read += lines.size();
  for (absl::string_view line : absl::StrSplit(lines, '\n', absl::SkipEmpty())) {
    if (egress::fuzz::ShowsSecret(line)) Fail(absl::StrCat("a log line shows a secret: ", line));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  World& world = TheWorld();
  FuzzedDataProvider in(data, size);
  std::vector<std::thread> calls;
  for (int rpcs = in.ConsumeIntegralInRange(1, 3); rpcs > 0; --rpcs) {
    FetchRequest request = MakeFetchRequest(in, world);
    const bool stream = in.ConsumeBool();
    const int deadline_ms = in.ConsumeIntegralInRange(50, 400);
    calls.emplace_back(Call, std::ref(world), std::move(request), stream, deadline_ms);
  }
  for (auto& call : calls) call.join();
  CheckLog(world);
  return 0;
}
