// One caller making sequential Fetch calls through egressd, the shape of the Go blog's
// headline (bench/wan.py): each call waits for the previous one, then `--gap_ms`.
// Prints one JSON line: {"requests": N, "failed": F, "reused": R, "fetch_ms": T}, where
// fetch_ms is the time spent in Fetch calls (the gaps not counted). Exits 1 when a fetch
// failed (the JSON line is printed all the same).
//
//   sequential_fetches --target=127.0.0.1:50051 --url=https://... --requests=100
//   sequential_fetches --url=https://... --method=POST --body=x --gap_ms=1900,2000
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "egress/v1/egress.grpc.pb.h"
#include "grpcpp/grpcpp.h"

ABSL_FLAG(std::string, target, "127.0.0.1:50051", "egressd's gRPC address");
ABSL_FLAG(std::string, url, "", "the URL to fetch");
ABSL_FLAG(std::string, method, "GET", "the request's method");
ABSL_FLAG(std::string, body, "", "the request's body");
ABSL_FLAG(int, requests, 100, "sequential fetches");
ABSL_FLAG(std::vector<std::string>, gap_ms, {"0"},
          "pause after each fetch, in ms; a list (1900,2000) is cycled through");
ABSL_FLAG(bool, read_body, false, "BODY_MODE_FULL instead of BODY_MODE_NONE");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  std::vector<std::chrono::milliseconds> gaps;
  for (const std::string& text : absl::GetFlag(FLAGS_gap_ms)) {
    int ms = 0;
    if (!absl::SimpleAtoi(text, &ms) || ms < 0) {
      std::fprintf(stderr, "--gap_ms: %s is not a number of milliseconds\n", text.c_str());
      return 2;
    }
    gaps.emplace_back(ms);
  }
  auto stub = egress::v1::Egress::NewStub(
      grpc::CreateChannel(absl::GetFlag(FLAGS_target), grpc::InsecureChannelCredentials()));

  egress::v1::FetchRequest request;
  request.set_url(absl::GetFlag(FLAGS_url));
  request.set_method(absl::GetFlag(FLAGS_method));
  request.set_body(absl::GetFlag(FLAGS_body));
  request.set_body_mode(absl::GetFlag(FLAGS_read_body) ? egress::v1::BODY_MODE_FULL
                                                       : egress::v1::BODY_MODE_NONE);
  // The channel connects (egressd may still be starting) before the clock starts: the
  // figure is the fetches' alone.
  {
    grpc::ClientContext context;
    context.set_wait_for_ready(true);
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    egress::v1::FetchResponse ignored;
    egress::v1::FetchRequest invalid;  // INVALID_ARGUMENT at once, no upstream traffic
    stub->Fetch(&context, invalid, &ignored);
  }

  const int requests = absl::GetFlag(FLAGS_requests);
  int failed = 0;
  int reused = 0;
  std::chrono::duration<double, std::milli> fetch_time{0};
  for (int i = 0; i < requests; ++i) {
    const auto start = std::chrono::steady_clock::now();
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    egress::v1::FetchResponse response;
    const grpc::Status status = stub->Fetch(&context, request, &response);
    fetch_time += std::chrono::steady_clock::now() - start;
    if (!status.ok()) {
      ++failed;
      std::fprintf(stderr, "fetch %d: %s\n", i, status.error_message().c_str());
    }
    reused += response.connection().reused();
    const auto gap = gaps[i % gaps.size()];
    if (gap.count() > 0 && i + 1 < requests) std::this_thread::sleep_for(gap);
  }
  std::printf("{\"requests\": %d, \"failed\": %d, \"reused\": %d, \"fetch_ms\": %.3f}\n", requests,
              failed, reused, fetch_time.count());
  return failed == 0 ? 0 : 1;
}
