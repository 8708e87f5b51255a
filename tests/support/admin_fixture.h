#ifndef EGRESS_TESTS_SUPPORT_ADMIN_FIXTURE_H_
#define EGRESS_TESTS_SUPPORT_ADMIN_FIXTURE_H_

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "service/admin/admin_server.h"
#include "tests/support/egress_fixture.h"

namespace egress::testing {

// EgressTest with the TransportAdmin service beside it, on a free loopback port.
class EgressAdminTest : public EgressTest {
 protected:
  // After StartEgress; `token` as --admin_token (empty: none).
  void StartAdmin(const std::string& token = "") {
    auto admin = AdminServer::Start(*server_, {"127.0.0.1:0", token, {}});
    ASSERT_TRUE(admin.ok()) << admin.status();
    admin_ = *std::move(admin);
    admin_stub_ = egress::v1::TransportAdmin::NewStub(grpc::CreateChannel(
        absl::StrCat("127.0.0.1:", admin_->port()), grpc::InsecureChannelCredentials()));
  }

  void TearDown() override {
    admin_.reset();
    EgressTest::TearDown();
  }

  std::unique_ptr<AdminServer> admin_;
  std::unique_ptr<egress::v1::TransportAdmin::Stub> admin_stub_;
};

}  // namespace egress::testing

#endif  // EGRESS_TESTS_SUPPORT_ADMIN_FIXTURE_H_
