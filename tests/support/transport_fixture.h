#ifndef EGRESS_TESTS_SUPPORT_TRANSPORT_FIXTURE_H_
#define EGRESS_TESTS_SUPPORT_TRANSPORT_FIXTURE_H_

#include <functional>
#include <future>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "service/transport/transport.h"
#include "tests/support/counting_observer.h"
#include "tests/support/nginx_upstream.h"
#include "tests/support/wait_for.h"

namespace egress::testing {

// The transport on its own (no gRPC) against one nginx for the suite: a fresh transport
// (pool, counters) for every test, with the test CA trusted and the egress policy off
// (the upstream is on loopback). TearDown checks that no connection is left active,
// draining or connecting, and that every HTTP/2 stream was given back.
class TransportTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite();
  static void TearDownTestSuite();
  void SetUp() override { StartTransport(); }
  void TearDown() override;

  // A new transport in place of the test's; `adjust` may change its settings first.
  void StartTransport(const std::function<void(transport::TransportSettings&)>& adjust = {});
  // No connection is active, draining or connecting, and no stream is open.
  bool Quiet();

  // Starts a fetch whose response goes to `promise`.
  std::shared_ptr<transport::PendingFetch> Begin(
      const std::string& url, std::promise<absl::StatusOr<transport::Response>>& promise,
      absl::Duration timeout = absl::Seconds(10), const std::string& method = "GET",
      std::string body = "");
  absl::StatusOr<transport::Response> Get(const std::string& url,
                                          absl::Duration timeout = absl::Seconds(10));
  // Reads a body to its end.
  static absl::StatusOr<std::string> ReadAll(transport::ResponseBody& body);
  // Fetches `url` and reads its body: the body, or why not (a status other than 200
  // included).
  absl::StatusOr<std::string> GetBody(const std::string& url);

  static NginxUpstream& nginx() { return *nginx_; }

  CountingObserver observer_;
  std::unique_ptr<transport::Transport> transport_;

 private:
  static std::unique_ptr<NginxUpstream> nginx_;
};

}  // namespace egress::testing

#endif  // EGRESS_TESTS_SUPPORT_TRANSPORT_FIXTURE_H_
