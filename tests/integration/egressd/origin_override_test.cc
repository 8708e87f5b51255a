// Per-origin overrides: drain policy, pool limits and TLS (client certificate) for the
// origins whose host matches, the defaults for the rest.
#include <string>

#include "absl/strings/str_cat.h"
#include "tests/support/egress_fixture.h"

namespace egress::testing {
namespace {

using egress::v1::BODY_MODE_NONE;
using egress::v1::FetchResponse;
using transport::DrainSkipReason;

class OriginOverrideTest : public EgressTest {};

TEST_F(OriginOverrideTest, DrainPolicyAppliesOnlyToMatchingHosts) {
  StartEgress([](egress::v1::Config& c) {
    auto* o = c.mutable_transport()->add_origins();
    o->set_host("127.0.0.1");
    o->mutable_drain()->set_mode(egress::v1::DRAIN_MODE_OFF);
  });
  FetchResponse response;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(Fetch(Request(nginx().HttpUrl("/cl/1k"), BODY_MODE_NONE), &response).ok());
    WaitForQuietPool();
    ASSERT_TRUE(Fetch(Request(nginx().HttpsUrl("/cl/1k"), BODY_MODE_NONE), &response).ok());
    WaitForQuietPool();
  }
  EXPECT_EQ(observer_.Skipped(DrainSkipReason::kDisabled), 3);  // http://127.0.0.1
  EXPECT_EQ(observer_.drains_completed, 3);                      // https://localhost
}

TEST_F(OriginOverrideTest, ClientCertificateIsPresentedOnlyToMatchingHosts) {
  const std::string url = absl::StrCat("https://localhost:", nginx().mtls_port(), "/cl/1k");
  StartEgress();
  FetchResponse response;
  ASSERT_TRUE(Fetch(Request(url), &response).ok());
  EXPECT_EQ(response.status_code(), 400);  // nginx: no required SSL certificate was sent
  server_.reset();

  StartEgress([&](egress::v1::Config& c) {
    auto* o = c.mutable_transport()->add_origins();
    o->set_host("*.localhost");  // does not match "localhost" itself
    o->set_client_cert_file(nginx().client_cert_file());
    o->set_client_key_file(nginx().client_key_file());
    auto* exact = c.mutable_transport()->add_origins();
    exact->set_host("localhost");
    exact->set_client_cert_file(nginx().client_cert_file());
    exact->set_client_key_file(nginx().client_key_file());
  });
  ASSERT_TRUE(Fetch(Request(url), &response).ok());
  EXPECT_EQ(response.status_code(), 200);
  EXPECT_EQ(response.body(), NginxUpstream::FileContent("1k"));
}

TEST_F(OriginOverrideTest, PoolLimitsApplyPerHost) {
  StartEgress([](egress::v1::Config& c) {
    auto* o = c.mutable_transport()->add_origins();
    o->set_host("localhost");
    o->set_max_conns_per_origin(1);
  });
  // Two streams at once: the second waits for localhost's only connection and, with a
  // short deadline, gives up; 127.0.0.1 has no such limit.
  grpc::ClientContext first_context;
  auto first = stub_->FetchStream(&first_context, Request(nginx().HttpsUrl("/stall")));
  egress::v1::FetchChunk chunk;
  ASSERT_TRUE(first->Read(&chunk));
  egress::v1::FetchRequest waiting = Request(nginx().HttpsUrl("/cl/1k"));
  waiting.mutable_timeout()->set_nanos(20'000'000);
  FetchResponse response;
  const grpc::Status status = Fetch(waiting, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << status.error_message();
  EXPECT_TRUE(Fetch(Request(nginx().HttpUrl("/cl/1k")), &response).ok());
  while (first->Read(&chunk)) {
  }
  EXPECT_TRUE(first->Finish().ok());
}

}  // namespace
}  // namespace egress::testing
