// TransportAdmin: reading and swapping the config at run time, under load, and who may.
#include <atomic>
#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "service/fleet/rendezvous.h"
#include "tests/support/admin_fixture.h"
#include "tests/support/dns_server.h"
#include "tests/support/wait_for.h"

namespace egress::testing {
namespace {

using egress::v1::Config;
using ::testing::HasSubstr;
using transport::DrainSkipReason;

class AdminTest : public EgressAdminTest {
 protected:
  absl::StatusOr<Config> Update(const Config& config) {
    egress::v1::UpdateConfigRequest request;
    *request.mutable_config() = config;
    Config in_force;
    grpc::ClientContext context;
    const grpc::Status status = admin_stub_->UpdateConfig(&context, request, &in_force);
    if (!status.ok()) return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
    return in_force;
  }

  // Each origin in GetPoolStats, and its owner.
  std::map<std::string, std::string> Owners() {
    egress::v1::PoolStats stats;
    grpc::ClientContext context;
    EXPECT_TRUE(
        admin_stub_->GetPoolStats(&context, egress::v1::GetPoolStatsRequest(), &stats).ok());
    std::map<std::string, std::string> owner_of;
    for (const auto& origin : stats.origins()) owner_of[origin.origin()] = origin.owner();
    return owner_of;
  }

  Config Current() {
    Config config;
    grpc::ClientContext context;
    EXPECT_TRUE(admin_stub_->GetConfig(&context, egress::v1::GetConfigRequest(), &config).ok());
    return config;
  }

};

TEST_F(AdminTest, GetConfigShowsTheConfigInForceWithDefaultsFilledIn) {
  StartEgress();
  StartAdmin();
  const Config config = Current();
  EXPECT_EQ(config.drain().mode(), egress::v1::DRAIN_MODE_FIXED);
  EXPECT_EQ(config.drain().max_bytes(), 262144u);
  EXPECT_EQ(config.transport().idle_timeout().seconds(), 90);
  EXPECT_EQ(config.policy().allow_cidrs(0), "127.0.0.0/8");
}

TEST_F(AdminTest, UpdateUnderLoadDropsNoFetchAndTheNextDrainsUseTheNewPolicy) {
  StartEgress();
  StartAdmin();
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0}, failed{0};
  std::vector<std::thread> callers;
  for (int i = 0; i < 32; ++i) {
    callers.emplace_back([&] {
      while (!stop) {
        egress::v1::FetchResponse response;
        const auto status =
            Fetch(Request(nginx().HttpsUrl("/cl/4k"), egress::v1::BODY_MODE_NONE), &response);
        ++(status.ok() ? ok : failed);
      }
    });
  }
  Config config = Current();
  for (int round = 0; round < 20; ++round) {
    config.mutable_drain()->set_max_bytes(round % 2 ? 262144 : 100000);
    config.mutable_transport()->set_max_idle_per_origin(round % 2 ? 100 : 8);
    ASSERT_TRUE(Update(config).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  stop = true;
  for (auto& caller : callers) caller.join();
  EXPECT_EQ(failed, 0);
  EXPECT_GT(ok, 100);

  // The new cap applies to the very next drains: 4 KiB is now over it.
  config.mutable_drain()->set_max_bytes(1000);
  ASSERT_TRUE(Update(config).ok());
  WaitForQuietPool();
  const int skipped_before = observer_.Skipped(DrainSkipReason::kOverByteCap);
  const int started_before = observer_.drains_started;
  for (int i = 0; i < 5; ++i) {
    egress::v1::FetchResponse response;
    ASSERT_TRUE(Fetch(Request(nginx().HttpsUrl("/cl/4k"), egress::v1::BODY_MODE_NONE), &response).ok());
  }
  EXPECT_EQ(observer_.Skipped(DrainSkipReason::kOverByteCap) - skipped_before, 5);
  EXPECT_EQ(observer_.drains_started, started_before);
}

TEST_F(AdminTest, LoweringMaxIdleRetiresSurplusIdleConnections) {
  StartEgress();
  StartAdmin();
  {
    // Three streams open at once (each body pauses 80 ms) need three connections.
    std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
    std::vector<std::unique_ptr<grpc::ClientReader<egress::v1::FetchChunk>>> readers;
    for (int i = 0; i < 3; ++i) {
      contexts.push_back(std::make_unique<grpc::ClientContext>());
      readers.push_back(stub_->FetchStream(contexts.back().get(), Request(nginx().HttpsUrl("/stall"))));
      egress::v1::FetchChunk chunk;
      ASSERT_TRUE(readers.back()->Read(&chunk));
    }
    for (auto& reader : readers) {
      egress::v1::FetchChunk chunk;
      while (reader->Read(&chunk)) {
      }
      EXPECT_TRUE(reader->Finish().ok());
    }
  }
  WaitForQuietPool();
  ASSERT_EQ(IdleConnections(), 3);
  Config config = Current();
  config.mutable_transport()->set_max_idle_per_origin(1);
  ASSERT_TRUE(Update(config).ok());
  egress::v1::PoolStats stats;
  grpc::ClientContext context;
  ASSERT_TRUE(admin_stub_->GetPoolStats(&context, egress::v1::GetPoolStatsRequest(), &stats).ok());
  ASSERT_EQ(stats.origins_size(), 1);
  EXPECT_EQ(stats.origins(0).idle(), 1u);
  EXPECT_EQ(stats.origins(0).opened(), 3u);
  EXPECT_EQ(observer_.Closed(transport::CloseReason::kPoolFull), 2);
}

// Each origin in GetPoolStats names its owner among affinity.peers: the member that
// rendezvous hashing gives it, whatever the order or the spelling of the list.
TEST_F(AdminTest, PoolStatsNameEachOriginsOwnerAmongThePeers) {
  StartEgress();
  StartAdmin();
  egress::v1::FetchResponse response;
  ASSERT_TRUE(Fetch(Request(nginx().HttpUrl("/")), &response).ok());
  ASSERT_TRUE(Fetch(Request(nginx().HttpsUrl("/")), &response).ok());
  const auto alone = Owners();
  ASSERT_EQ(alone.size(), 2u);
  for (const auto& [origin, owner] : alone) EXPECT_EQ(owner, "") << origin;

  const std::vector<std::string> members = {"10.0.0.1:7443", "10.0.0.2:7443", "10.0.0.3:7443"};
  Config config = Current();
  for (const std::string& member : members) config.mutable_affinity()->add_peers(member);
  ASSERT_TRUE(Update(config).ok());
  const auto in_order = Owners();
  ASSERT_EQ(in_order.size(), 2u);
  for (const auto& [origin, owner] : in_order) {
    EXPECT_THAT(members, ::testing::Contains(owner)) << origin;
    EXPECT_EQ(owner, fleet::OwnerOf(members, origin)) << origin;
  }

  // The same servers, listed backwards and spelled otherwise (hex, short and octal IPv4).
  config.mutable_affinity()->clear_peers();
  for (const char* member : {"0x0a000003:7443", "10.2:7443", "012.0.0.1:7443"}) {
    config.mutable_affinity()->add_peers(member);
  }
  const auto respelled = Update(config);
  ASSERT_TRUE(respelled.ok()) << respelled.status();
  EXPECT_THAT(respelled->affinity().peers(),
              ::testing::ElementsAre("10.0.0.3:7443", "10.0.0.2:7443", "10.0.0.1:7443"));
  EXPECT_EQ(Owners(), in_order);
}

// With affinity.service, the members are the addresses the name has (run_in_netns.sh
// points /etc/resolv.conf at 127.0.0.53), asked every second: a replica whose address
// joins the answer owns its share of the origins, and one that leaves gives its share
// back. Each origin's owner follows OwnerOf over the addresses the DNS server gives.
TEST_F(AdminTest, PoolStatsNameOwnersAmongTheAddressesOfTheService) {
  std::unique_ptr<DnsServer> dns = DnsServer::Start("127.0.0.53");
  ASSERT_NE(dns, nullptr) << "cannot bind 127.0.0.53:53";
  std::vector<std::string> addresses = {"10.0.0.1", "10.0.0.2"};
  dns->AnswerAll("egressd-peers.test", addresses, 1);
  StartEgress(
      [](Config& config) { config.mutable_affinity()->set_service("egressd-peers.test:7443"); });
  StartAdmin();
  egress::v1::FetchResponse response;
  ASSERT_TRUE(Fetch(Request(nginx().HttpUrl("/")), &response).ok());
  ASSERT_TRUE(Fetch(Request(nginx().HttpsUrl("/")), &response).ok());
  const auto expected = [&] {
    std::vector<std::string> members;
    for (const std::string& address : addresses) members.push_back(address + ":7443");
    std::map<std::string, std::string> owner_of;
    for (const auto& [origin, owner] : Owners()) {
      owner_of[origin] = std::string(fleet::OwnerOf(members, origin));
    }
    return owner_of;
  };
  ASSERT_TRUE(WaitFor([&] { return Owners() == expected(); }, absl::Seconds(30)));
  ASSERT_EQ(Owners().size(), 2u);

  // A replica joins whose address owns at least one of the two origins, so that the
  // owners must change for the test to pass.
  const std::map<std::string, std::string> before = Owners();
  for (int last = 3; last < 250; ++last) {
    addresses.push_back(absl::StrCat("10.0.0.", last));
    if (expected() != before) break;
    addresses.pop_back();
  }
  ASSERT_EQ(addresses.size(), 3u);
  dns->AnswerAll("egressd-peers.test", addresses, 1);
  ASSERT_TRUE(WaitFor([&] { return Owners() == expected(); }, absl::Seconds(30)))
      << "the joining " << addresses.back() << " never owned its share";
  EXPECT_NE(Owners(), before);

  // It leaves: its origins go back to the owners they had.
  addresses.pop_back();
  dns->AnswerAll("egressd-peers.test", addresses, 1);
  ASSERT_TRUE(WaitFor([&] { return Owners() == before; }, absl::Seconds(30)));

  // The DNS server fails for the name (SERVFAIL, to the A and the AAAA query of each
  // lookup; the fleet's lookups bypass the cache and its stale answers): the members
  // found last stay.
  dns->Fail("egressd-peers.test");
  const int failed_before = dns->Queries("egressd-peers.test");
  ASSERT_TRUE(WaitFor([&] { return dns->Queries("egressd-peers.test") >= failed_before + 6; },
                      absl::Seconds(60)));
  EXPECT_EQ(Owners(), before);
}

TEST_F(AdminTest, InvalidUpdateIsRejectedAndChangesNothing) {
  StartEgress();
  StartAdmin();
  const Config before = Current();
  Config bad = before;
  bad.mutable_policy()->add_deny_cidrs("10.0.0.0/99");
  auto result = Update(bad);
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(result.status()));
  EXPECT_THAT(std::string(result.status().message()), HasSubstr("policy.deny_cidrs[0]"));
  EXPECT_EQ(Current().DebugString(), before.DebugString());
}

TEST_F(AdminTest, BearerTokenIsRequiredWhenSet) {
  StartEgress();
  StartAdmin("s3cret");
  Config config;
  grpc::ClientContext anonymous;
  EXPECT_EQ(admin_stub_->GetConfig(&anonymous, egress::v1::GetConfigRequest(), &config).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  grpc::ClientContext wrong;
  wrong.AddMetadata("authorization", "Bearer guess");
  EXPECT_EQ(admin_stub_->GetConfig(&wrong, egress::v1::GetConfigRequest(), &config).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  grpc::ClientContext operator_context;
  operator_context.AddMetadata("authorization", "Bearer s3cret");
  EXPECT_TRUE(admin_stub_->GetConfig(&operator_context, egress::v1::GetConfigRequest(), &config).ok());
}

TEST_F(AdminTest, NonLoopbackListenerNeedsATokenOrMtls) {
  StartEgress();
  auto open = AdminServer::Start(*server_, {"0.0.0.0:0", "", {}});
  ASSERT_FALSE(open.ok());
  EXPECT_THAT(std::string(open.status().message()), HasSubstr("is not a loopback address"));
  auto guarded = AdminServer::Start(
      *server_, {"0.0.0.0:0", "s3cret", {nginx().server_cert_file(), nginx().server_key_file(), ""}});
  EXPECT_TRUE(guarded.ok()) << guarded.status();
  EXPECT_TRUE(IsLoopbackListenAddress("127.0.0.1:50052"));
  EXPECT_TRUE(IsLoopbackListenAddress("[::1]:50052"));
  EXPECT_TRUE(IsLoopbackListenAddress("localhost:50052"));
  EXPECT_FALSE(IsLoopbackListenAddress("[::]:50052"));
  EXPECT_FALSE(IsLoopbackListenAddress("10.0.0.1:50052"));
}

}  // namespace
}  // namespace egress::testing
