#ifndef EGRESS_TESTS_SUPPORT_EGRESS_FIXTURE_H_
#define EGRESS_TESTS_SUPPORT_EGRESS_FIXTURE_H_

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/time/time.h"
#include "egress/v1/egress.grpc.pb.h"
#include "google/rpc/error_details.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "service/server/server.h"
#include "service/transport/pool/origin_stats.h"
#include "tests/support/counting_observer.h"
#include "tests/support/fault_server.h"
#include "tests/support/nginx_upstream.h"
#include "tests/support/status_details.h"
#include "tests/support/wait_for.h"

namespace egress::testing {

// One nginx for the suite; a fresh egress (transport, pool, counters) for every test,
// called over real gRPC on loopback. TearDown checks that no connection is left active,
// draining or connecting.
class EgressTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite();
  static void TearDownTestSuite();
  void TearDown() override;

  // Starts egress with the test CA trusted; `configure` may change the config first.
  // `data_plane` says what serves the Egress port (by default the one
  // EGRESS_TEST_DATA_PLANE names, see data_plane_under_test.h).
  void StartEgress(const std::function<void(egress::v1::Config&)>& configure = {},
                   DataPlane data_plane = FixtureDataPlane());
  // The DataPlane DataPlaneUnderTest() names.
  static DataPlane FixtureDataPlane();

  // A request whose URL is made unique to this test, so access-log counts are its own.
  egress::v1::FetchRequest Request(const std::string& url,
                                   egress::v1::BodyMode mode = egress::v1::BODY_MODE_FULL) const;
  // The path and query that nginx logs for Request(url).
  std::string LoggedUri(const std::string& path) const;

  grpc::Status Fetch(const egress::v1::FetchRequest& request,
                     egress::v1::FetchResponse* response);
  // Waits until the pool has no active, draining or connecting connection.
  void WaitForQuietPool();
  int IdleConnections();
  // The pool's figures for one origin ("scheme://host:port"); zeros if it has none.
  transport::OriginStats PoolStatsFor(const std::string& origin);

  static NginxUpstream& nginx() { return *nginx_; }

  // A pause between requests, stretched by EGRESS_TEST_TIME_SCALE (set by the sanitizer
  // configs, whose builds run several times slower) so that scenarios keep their shape.
  static std::chrono::milliseconds Gap(int milliseconds);

  CountingObserver observer_;
  // What StartEgress gives DataPlane::kLoops' caller connections.
  dataplane::CallerLimits caller_limits_;
  std::unique_ptr<EgressServer> server_;
  std::unique_ptr<egress::v1::Egress::Stub> stub_;

 private:
  static std::unique_ptr<NginxUpstream> nginx_;
};

// A Fetch on a thread of its own, as `caller` (the x-egress-caller metadata) when set;
// cancelled if still under way when it goes out of scope.
class BackgroundFetch {
 public:
  BackgroundFetch(egress::v1::Egress::Stub& stub, egress::v1::FetchRequest request,
                  const std::string& caller = "",
                  std::chrono::milliseconds deadline = std::chrono::seconds(30));
  ~BackgroundFetch();

  void Cancel() { context_.TryCancel(); }
  const grpc::Status& Wait();

 private:
  grpc::ClientContext context_;
  egress::v1::FetchResponse response_;
  grpc::Status status_;
  std::thread thread_;
};

// The descriptors this process has open.
int OpenFileDescriptors();

// EgressTest with an upstream that misbehaves on command, for the whole suite.
class EgressFaultsTest : public EgressTest {
 protected:
  static void SetUpTestSuite();
  static void TearDownTestSuite();

  static FaultServer& faults() { return *faults_; }
  // The pool's figures for the fault server's plain-HTTP origin.
  transport::OriginStats FaultOrigin();
  // "http://127.0.0.1:PORT", the fault server's origin as messages name it.
  std::string FaultKey() const;
  // Idle pooled connections to the fault server, under either of its names (127.0.0.1
  // and localhost: a redirect to "another origin" goes to localhost).
  int IdleToFaultServer();

  // A fetch from nginx succeeds with the right body.
  void ExpectHealthy();
  // Takes the descriptor baseline ExpectRecovered compares with; call it once egress
  // has served a fetch (gRPC's own descriptors are open from then on).
  void RecordBaseline();
  // Open descriptors that are neither pooled connections nor the fault server's side of
  // a connection: what must come back to the baseline (or below it).
  int FixedDescriptors();
  // The pool and the process are as they were before the fault, and egress still serves.
  void ExpectRecovered();

  int baseline_fds_ = 0;
  int accepted_before_ = 0;

 private:
  static std::unique_ptr<FaultServer> faults_;
};

}  // namespace egress::testing

#endif  // EGRESS_TESTS_SUPPORT_EGRESS_FIXTURE_H_
