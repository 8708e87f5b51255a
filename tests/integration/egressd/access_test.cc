// Access control that fails closed (issue 21): who a caller is and what a caller without
// a rule may do; who may call the admin service and what it may change.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <future>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpcpp/generic/generic_stub.h"
#include "service/admin/admin_server.h"
#include "service/base/files.h"
#include "service/config/config.h"
#include "service/config/config_store.h"
#include "service/server/server_credentials.h"
#include "tests/support/child_process.h"
#include "tests/support/egress_fixture.h"
#include "tests/support/test_pki.h"

namespace egress::testing {
namespace {

using egress::v1::Config;
using egress::v1::FetchResponse;
using ::testing::HasSubstr;
using ::testing::Not;
using transport::DenyReason;

class AccessTest : public EgressTest {
 protected:
  static void SetUpTestSuite() {
    EgressTest::SetUpTestSuite();
    pki_ = new Pki(absl::StrCat(std::getenv("TEST_TMPDIR"), "/access-pki"));
  }
  static void TearDownTestSuite() {
    delete pki_;
    EgressTest::TearDownTestSuite();
  }

  void TearDown() override {
    admin_.reset();
    EgressTest::TearDown();
  }

  // Egress served over mTLS with the suite's CA; stub_ calls it as client `name`.
  void StartMtlsEgress(const std::string& client,
                       const std::function<void(Config&)>& configure) {
    Config proto;
    proto.mutable_transport()->set_extra_ca_file(nginx().ca_file());
    proto.mutable_policy()->add_allow_cidrs("127.0.0.0/8");
    configure(proto);
    auto config = BuildConfig(proto);
    ASSERT_TRUE(config.ok()) << config.status();
    auto credentials = LoadServerCredentials(pki_->ServerFiles(), "--grpc_tls");
    ASSERT_TRUE(credentials.ok()) << credentials.status();
    auto server = EgressServer::Start(*config, "127.0.0.1:0", observer_, observer_, *credentials);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    stub_ = egress::v1::Egress::NewStub(grpc::CreateChannel(
        absl::StrCat("localhost:", server_->grpc_port()), pki_->Client(client)));
  }

  grpc::Status FetchAs(const std::string& header_value, const std::string& url) {
    grpc::ClientContext context;
    if (!header_value.empty()) context.AddMetadata("x-egress-caller", header_value);
    FetchResponse response;
    return stub_->Fetch(&context, Request(url), &response);
  }

  void StartAdmin(AdminOptions options) {
    options.listen = "127.0.0.1:0";
    auto admin = AdminServer::Start(*server_, options);
    ASSERT_TRUE(admin.ok()) << admin.status();
    admin_ = *std::move(admin);
  }

  std::unique_ptr<egress::v1::TransportAdmin::Stub> AdminStub(
      std::shared_ptr<grpc::ChannelCredentials> credentials) {
    return egress::v1::TransportAdmin::NewStub(grpc::CreateChannel(
        absl::StrCat("localhost:", admin_->port()), std::move(credentials)));
  }

  static grpc::Status Update(egress::v1::TransportAdmin::Stub& stub, const Config& config,
                             const std::string& token = "") {
    egress::v1::UpdateConfigRequest request;
    *request.mutable_config() = config;
    Config in_force;
    grpc::ClientContext context;
    if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
    return stub.UpdateConfig(&context, request, &in_force);
  }

  static grpc::Status Get(egress::v1::TransportAdmin::Stub& stub, const std::string& token = "") {
    Config config;
    grpc::ClientContext context;
    if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
    return stub.GetConfig(&context, egress::v1::GetConfigRequest(), &config);
  }

  static Pki* pki_;
  std::unique_ptr<AdminServer> admin_;
};

Pki* AccessTest::pki_ = nullptr;

// --- Callers -------------------------------------------------------------------------

TEST_F(AccessTest, ACallerWithoutIdentityIsDeniedWhenUnknownCallersAreDenied) {
  StartEgress([](Config& c) {
    c.mutable_policy()->set_caller_header("x-egress-caller");
    c.mutable_policy()->add_caller_header_trusted_peers("127.0.0.1");
    c.mutable_policy()->set_unknown_callers(egress::v1::UNKNOWN_CALLERS_DENY);
    auto* rule = c.mutable_policy()->add_callers();
    rule->set_identity("billing");
    rule->add_allowed_hosts("localhost");
  });
  const grpc::Status denied = FetchAs("", nginx().HttpsUrl("/cl/1k"));
  EXPECT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(denied.error_message(), HasSubstr("the caller has no identity"));
  EXPECT_THAT(denied.error_message(), HasSubstr("policy.unknown_callers is DENY"));
  EXPECT_EQ(observer_.Denied(DenyReason::kUnknownCaller), 1);
}

TEST_F(AccessTest, ACallerWithoutARuleIsDeniedWhenUnknownCallersAreDenied) {
  StartEgress([](Config& c) {
    c.mutable_policy()->set_caller_header("x-egress-caller");
    c.mutable_policy()->add_caller_header_trusted_peers("127.0.0.1");
    c.mutable_policy()->set_unknown_callers(egress::v1::UNKNOWN_CALLERS_DENY);
    auto* rule = c.mutable_policy()->add_callers();
    rule->set_identity("billing");
    rule->add_allowed_hosts("localhost");
  });
  EXPECT_TRUE(FetchAs("billing", nginx().HttpsUrl("/cl/1k")).ok());
  const grpc::Status denied = FetchAs("search", nginx().HttpsUrl("/cl/1k"));
  EXPECT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(denied.error_message(), HasSubstr("caller \"search\" has no policy.callers rule"));
  EXPECT_EQ(observer_.Denied(DenyReason::kUnknownCaller), 1);
}

TEST_F(AccessTest, UnknownCallersGetTheDefaultPolicyByDefault) {
  StartEgress();
  EXPECT_EQ(server_->config().Get()->proto.policy().unknown_callers(),
            egress::v1::UNKNOWN_CALLERS_DEFAULT_POLICY);
  EXPECT_TRUE(FetchAs("", nginx().HttpsUrl("/cl/1k")).ok());
}

TEST_F(AccessTest, ACallerRuleWithNoHostsIsRejectedAtConfigLoad) {
  Config proto;
  proto.mutable_policy()->add_callers()->set_identity("batch");
  auto config = BuildConfig(proto);
  ASSERT_FALSE(config.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(config.status()));
  EXPECT_THAT(std::string(config.status().message()),
              HasSubstr("policy.callers[0].allowed_hosts: empty"));
}

TEST_F(AccessTest, TwoRulesForOneCallerAreRejectedAtConfigLoad) {
  Config proto;
  for (const char* hosts : {"*", "localhost"}) {
    auto* rule = proto.mutable_policy()->add_callers();
    rule->set_identity("batch");
    rule->add_allowed_hosts(hosts);
  }
  auto config = BuildConfig(proto);
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(std::string(config.status().message()),
              HasSubstr("policy.callers[1].identity: caller \"batch\" has an earlier rule"));
}

TEST_F(AccessTest, AStarRuleLetsThatCallerReachEveryHostThePolicyAllows) {
  StartEgress([](Config& c) {
    c.mutable_policy()->set_caller_header("x-egress-caller");
    c.mutable_policy()->add_caller_header_trusted_peers("127.0.0.1");
    c.mutable_policy()->set_unknown_callers(egress::v1::UNKNOWN_CALLERS_DENY);
    auto* rule = c.mutable_policy()->add_callers();
    rule->set_identity("batch");
    rule->add_allowed_hosts("*");
  });
  EXPECT_TRUE(FetchAs("batch", nginx().HttpUrl("/cl/1k")).ok());
  EXPECT_TRUE(FetchAs("batch", nginx().HttpsUrl("/cl/1k")).ok());
  Config mixed;
  auto* rule = mixed.mutable_policy()->add_callers();
  rule->set_identity("batch");
  rule->add_allowed_hosts("*");
  rule->add_allowed_hosts("localhost");
  EXPECT_FALSE(BuildConfig(mixed).ok());
}

TEST_F(AccessTest, CallerHeaderFromAnUntrustedPeerIsIgnored) {
  StartEgress([](Config& c) {
    c.mutable_policy()->set_caller_header("x-egress-caller");
    c.mutable_policy()->add_caller_header_trusted_peers("192.0.2.0/24");  // not loopback
    c.mutable_policy()->set_unknown_callers(egress::v1::UNKNOWN_CALLERS_DENY);
    auto* rule = c.mutable_policy()->add_callers();
    rule->set_identity("batch");
    rule->add_allowed_hosts("*");
  });
  const grpc::Status denied = FetchAs("batch", nginx().HttpsUrl("/cl/1k"));
  EXPECT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(denied.error_message(), HasSubstr("the caller has no identity"));
}

// gRPC names an IPv6 peer "ipv6:%5B::1%5D:port": a mesh proxy on IPv6 listed in
// caller_header_trusted_peers is believed like one on IPv4.
TEST_F(AccessTest, CallerHeaderFromATrustedIpv6PeerNamesTheCaller) {
  Config proto;
  proto.mutable_transport()->set_extra_ca_file(nginx().ca_file());
  proto.mutable_policy()->add_allow_cidrs("127.0.0.0/8");
  proto.mutable_policy()->set_caller_header("x-egress-caller");
  proto.mutable_policy()->add_caller_header_trusted_peers("::1/128");
  proto.mutable_policy()->set_unknown_callers(egress::v1::UNKNOWN_CALLERS_DENY);
  auto* rule = proto.mutable_policy()->add_callers();
  rule->set_identity("batch");
  rule->add_allowed_hosts("*");
  auto config = BuildConfig(proto);
  ASSERT_TRUE(config.ok()) << config.status();
  auto server = EgressServer::Start(*config, "[::1]:0", observer_, observer_);
  if (!server.ok()) GTEST_SKIP() << "no IPv6 loopback here: " << server.status();
  server_ = *std::move(server);
  stub_ = egress::v1::Egress::NewStub(grpc::CreateChannel(
      absl::StrCat("[::1]:", server_->grpc_port()), grpc::InsecureChannelCredentials()));
  const grpc::Status status = FetchAs("batch", nginx().HttpUrl("/cl/1k"));
  EXPECT_TRUE(status.ok()) << status.error_message();
  const grpc::Status unnamed = FetchAs("", nginx().HttpUrl("/cl/1k"));
  EXPECT_EQ(unnamed.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(observer_.Denied(DenyReason::kUnknownCaller), 1);
}

// Two values could be two proxies' opinions (or one forged after a real one): neither
// is believed.
TEST_F(AccessTest, ACallerHeaderSentTwiceNamesNoCaller) {
  StartEgress([](Config& c) {
    c.mutable_policy()->set_caller_header("x-egress-caller");
    c.mutable_policy()->add_caller_header_trusted_peers("127.0.0.1");
    c.mutable_policy()->set_unknown_callers(egress::v1::UNKNOWN_CALLERS_DENY);
    for (const char* identity : {"billing", "batch"}) {
      auto* rule = c.mutable_policy()->add_callers();
      rule->set_identity(identity);
      rule->add_allowed_hosts("*");
    }
  });
  grpc::ClientContext context;
  context.AddMetadata("x-egress-caller", "billing");
  context.AddMetadata("x-egress-caller", "batch");
  FetchResponse response;
  const grpc::Status denied = stub_->Fetch(&context, Request(nginx().HttpsUrl("/cl/1k")), &response);
  EXPECT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(denied.error_message(), HasSubstr("the caller has no identity"));
  EXPECT_TRUE(FetchAs("billing", nginx().HttpsUrl("/cl/1k")).ok());
}

// A mesh proxy trusted by its certificate's identity may name the caller; another
// certificate's peer on the same address may not, and is its own certificate instead.
TEST_F(AccessTest, CallerHeaderIsBelievedFromAPeerTrustedByItsCertificateOnly) {
  StartMtlsEgress("admin", [](Config& c) {
    c.mutable_policy()->set_caller_header("x-egress-caller");
    c.mutable_policy()->add_caller_header_trusted_peers("spiffe://test/admin");
    c.mutable_policy()->set_unknown_callers(egress::v1::UNKNOWN_CALLERS_DENY);
    auto* rule = c.mutable_policy()->add_callers();
    rule->set_identity("batch");
    rule->add_allowed_hosts("localhost");
  });
  EXPECT_TRUE(FetchAs("batch", nginx().HttpsUrl("/cl/1k")).ok());
  stub_ = egress::v1::Egress::NewStub(grpc::CreateChannel(
      absl::StrCat("localhost:", server_->grpc_port()), pki_->Client("checkout")));
  const grpc::Status denied = FetchAs("batch", nginx().HttpsUrl("/cl/1k"));
  EXPECT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(denied.error_message(), HasSubstr("caller \"spiffe://test/checkout\""));
}

TEST_F(AccessTest, CallerHeaderWithNoTrustedPeersIsIgnoredAndWarnedAbout) {
  Config proto;
  proto.mutable_policy()->set_caller_header("x-egress-caller");
  auto config = BuildConfig(proto);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_THAT(ConfigWarnings(*config),
              ::testing::Contains(HasSubstr("policy.caller_header_trusted_peers is empty")));
}

// What an AuthContext holds for a certificate with URI and DNS SANs (here the server's,
// seen by the client; gRPC fills both sides alike), printed for the record: the identity
// sources read peer_uri, peer_dns and x509_common_name.
void PrintAuthContext(const grpc::AuthContext& auth) {
  for (const auto& [name, value] : auth) {
    std::cout << "auth context: " << name << " = "
              << std::string(value.data(), std::min<size_t>(value.size(), 60)) << "\n";
  }
}

TEST_F(AccessTest, TheIdentitySourcePicksWhichCertificateNameIsTheCaller) {
  for (const auto& [source, identity] :
       {std::pair{egress::v1::IDENTITY_SOURCE_URI_SAN, "spiffe://test/checkout"},
        std::pair{egress::v1::IDENTITY_SOURCE_DNS_SAN, "checkout.test"},
        std::pair{egress::v1::IDENTITY_SOURCE_COMMON_NAME, "checkout-cn"}}) {
    SCOPED_TRACE(identity);
    StartMtlsEgress("checkout", [&, source = source, identity = identity](Config& c) {
      c.mutable_policy()->set_identity_source(source);
      c.mutable_policy()->set_unknown_callers(egress::v1::UNKNOWN_CALLERS_DENY);
      auto* rule = c.mutable_policy()->add_callers();
      rule->set_identity(identity);
      rule->add_allowed_hosts("localhost");
    });
    grpc::ClientContext context;
    FetchResponse response;
    EXPECT_TRUE(stub_->Fetch(&context, Request(nginx().HttpsUrl("/cl/1k")), &response).ok());
    if (source == egress::v1::IDENTITY_SOURCE_URI_SAN) PrintAuthContext(*context.auth_context());
    const grpc::Status denied = FetchAs("", nginx().HttpUrl("/cl/1k"));
    EXPECT_THAT(denied.error_message(), HasSubstr(absl::StrCat("caller \"", identity, "\"")));
    WaitForQuietPool();
    stub_.reset();
    server_.reset();
  }
}

// --- Admin ---------------------------------------------------------------------------

TEST_F(AccessTest, ACertificateTheCaSignedButNotOnTheAdminListIsDenied) {
  StartEgress();
  StartAdmin({"", "", pki_->ServerFiles(), "", {"spiffe://test/admin"}});
  auto intruder = AdminStub(pki_->Client("intruder"));
  Config config;
  config.mutable_drain()->set_max_bytes(1000);
  const grpc::Status denied = Update(*intruder, config);
  EXPECT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(denied.error_message(), HasSubstr("--admin_identities"));
  EXPECT_THAT(denied.error_message(), HasSubstr("spiffe://test/intruder"));
  EXPECT_EQ(Get(*intruder).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(server_->config().Get()->proto.drain().max_bytes(), 1000u);

  auto admin = AdminStub(pki_->Client("admin"));
  EXPECT_TRUE(Update(*admin, config).ok());
  EXPECT_EQ(server_->config().Get()->proto.drain().max_bytes(), 1000u);
}

TEST_F(AccessTest, AnAdminIdentityMayBeACertificatesDnsName) {
  StartEgress();
  StartAdmin({"", "", pki_->ServerFiles(), "", {"checkout.test"}});
  EXPECT_TRUE(Get(*AdminStub(pki_->Client("checkout"))).ok());
  const grpc::Status denied = Get(*AdminStub(pki_->Client("admin")));
  EXPECT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(denied.error_message(), HasSubstr("spiffe://test/admin"));
}

TEST_F(AccessTest, MtlsAdminWithoutAnIdentityListOrTokenRefusesToStart) {
  StartEgress();
  auto admin = AdminServer::Start(*server_, {"127.0.0.1:0", "", pki_->ServerFiles()});
  ASSERT_FALSE(admin.ok());
  EXPECT_THAT(std::string(admin.status().message()), HasSubstr("--admin_identities"));
}

TEST_F(AccessTest, APlaintextTokenOffLoopbackRefusesToStart) {
  StartEgress();
  auto admin = AdminServer::Start(*server_, {"0.0.0.0:0", "s3cret", {}});
  ASSERT_FALSE(admin.ok());
  EXPECT_THAT(std::string(admin.status().message()), HasSubstr("in the clear"));
  // Over TLS it may.
  auto tls = AdminServer::Start(
      *server_, {"0.0.0.0:0", "s3cret", {pki_->File("server.pem"), pki_->File("server.key"), ""}});
  EXPECT_TRUE(tls.ok()) << tls.status();
}

TEST_F(AccessTest, TheTokenFileIsReadAgainWhenItChanges) {
  StartEgress();
  const std::string path = absl::StrCat(std::getenv("TEST_TMPDIR"), "/admin-token");
  std::ofstream(path) << "first\n";
  StartAdmin({"", "", {}, path});
  auto stub = AdminStub(grpc::InsecureChannelCredentials());
  EXPECT_TRUE(Get(*stub, "first").ok());
  std::ofstream(path + ".new") << "second-token\n";
  ASSERT_EQ(std::rename((path + ".new").c_str(), path.c_str()), 0);
  // The file is read off the gRPC threads (issue 38): a call with a token that does not
  // match asks the watcher to look now, and the caller's retry meets the new token.
  EXPECT_TRUE(WaitFor([&] { return Get(*stub, "second-token").ok(); }));
  EXPECT_EQ(Get(*stub, "first").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  std::ofstream(path, std::ios::trunc).flush();  // emptied: fails closed
  grpc::StatusCode emptied = grpc::StatusCode::OK;
  WaitFor([&] {
    emptied = Get(*stub, "second-token").error_code();
    return emptied != grpc::StatusCode::OK;
  });
  EXPECT_EQ(emptied, grpc::StatusCode::UNAUTHENTICATED);
}

// The bidi reflection method called as a unary call: one request, one response.
grpc::Status CallReflection(const std::shared_ptr<grpc::Channel>& channel) {
  grpc::GenericStub generic(channel);
  grpc::Slice empty("");
  grpc::ByteBuffer request(&empty, 1);
  grpc::ByteBuffer response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  std::promise<grpc::Status> done;
  generic.UnaryCall(&context, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
                    grpc::StubOptions(), &request, &response,
                    [&](grpc::Status status) { done.set_value(status); });
  return done.get_future().get();
}

TEST_F(AccessTest, ReflectionIsNotServedOnTheAdminListenerOutsideItsAuthorization) {
  StartEgress();
  StartAdmin({"", "s3cret", {}});
  // Served on the Egress listener, where it belongs.
  EXPECT_TRUE(CallReflection(grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->grpc_port()),
                                                 grpc::InsecureChannelCredentials()))
                  .ok());
  const grpc::Status admin = CallReflection(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", admin_->port()), grpc::InsecureChannelCredentials()));
  EXPECT_EQ(admin.error_code(), grpc::StatusCode::UNIMPLEMENTED) << admin.error_message();
}

TEST_F(AccessTest, TurningThePolicyOffOverGrpcNeedsTheFlag) {
  StartEgress();
  StartAdmin({});
  auto stub = AdminStub(grpc::InsecureChannelCredentials());
  Config off = server_->config().Get()->proto;
  off.mutable_policy()->set_disabled(true);
  grpc::Status denied = Update(*stub, off);
  EXPECT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(denied.error_message(), HasSubstr("policy.disabled"));
  EXPECT_THAT(denied.error_message(), HasSubstr("--admin_allow_policy_off"));
  Config everything = server_->config().Get()->proto;
  everything.mutable_policy()->add_allow_cidrs("::/0");
  denied = Update(*stub, everything);
  EXPECT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(denied.error_message(), HasSubstr("allow every IPv6 address"));
  // Two halves allow every address as surely as one /0.
  Config halves = server_->config().Get()->proto;
  halves.mutable_policy()->add_allow_cidrs("128.0.0.0/1");
  halves.mutable_policy()->add_allow_cidrs("0.0.0.0/1");
  denied = Update(*stub, halves);
  EXPECT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(denied.error_message(), HasSubstr("allow every IPv4 address"));
  // Every special-purpose range open is everything, though a public /8 is left out.
  Config specials = server_->config().Get()->proto;
  for (const char* cidr : {"0.0.0.0/2", "64.0.0.0/3", "96.0.0.0/4", "112.0.0.0/5",
                           "120.0.0.0/6", "124.0.0.0/7", "127.0.0.0/8", "128.0.0.0/1"}) {
    specials.mutable_policy()->add_allow_cidrs(cidr);
  }
  denied = Update(*stub, specials);
  EXPECT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(denied.error_message(), HasSubstr("allow every IPv4 address"));
  // ::ffff:127.0.0.1 is 127.0.0.1: the IPv4-mapped range whole opens all of IPv4.
  Config mapped = server_->config().Get()->proto;
  mapped.mutable_policy()->add_allow_cidrs("::ffff:0:0/96");
  denied = Update(*stub, mapped);
  EXPECT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(denied.error_message(), HasSubstr("::ffff:0.0.0.0/96 whole"));
  Config wide = server_->config().Get()->proto;  // wide, but not everything: accepted
  wide.mutable_policy()->add_allow_cidrs("0.0.0.0/1");
  wide.mutable_policy()->add_allow_cidrs("128.0.0.0/2");
  EXPECT_TRUE(Update(*stub, wide).ok());
  EXPECT_FALSE(server_->config().Get()->proto.policy().disabled());

  admin_.reset();
  AdminOptions allowed;
  allowed.allow_policy_off = true;
  StartAdmin(allowed);
  stub = AdminStub(grpc::InsecureChannelCredentials());
  EXPECT_TRUE(Update(*stub, off).ok());
  EXPECT_TRUE(server_->config().Get()->proto.policy().disabled());
}

TEST_F(AccessTest, TrustingEveryPeerOrLettingUnknownCallersInOverGrpcNeedsTheFlag) {
  StartEgress([](Config& c) {
    c.mutable_policy()->set_caller_header("x-egress-caller");
    c.mutable_policy()->add_caller_header_trusted_peers("127.0.0.1");
    c.mutable_policy()->set_unknown_callers(egress::v1::UNKNOWN_CALLERS_DENY);
    auto* rule = c.mutable_policy()->add_callers();
    rule->set_identity("checkout");
    rule->add_allowed_hosts("localhost");
  });
  StartAdmin({});
  auto stub = AdminStub(grpc::InsecureChannelCredentials());
  Config everyone = server_->config().Get()->proto;
  everyone.mutable_policy()->add_caller_header_trusted_peers("0.0.0.0/0");
  grpc::Status denied = Update(*stub, everyone);
  EXPECT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(denied.error_message(), HasSubstr("trust every IPv4 peer"));
  Config let_in = server_->config().Get()->proto;
  let_in.mutable_policy()->set_unknown_callers(egress::v1::UNKNOWN_CALLERS_DEFAULT_POLICY);
  denied = Update(*stub, let_in);
  EXPECT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(denied.error_message(), HasSubstr("policy.unknown_callers"));
  Config unset = server_->config().Get()->proto;  // unset means DEFAULT_POLICY
  unset.mutable_policy()->clear_unknown_callers();
  EXPECT_EQ(Update(*stub, unset).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(server_->config().Get()->proto.policy().unknown_callers(),
            egress::v1::UNKNOWN_CALLERS_DENY);
  Config narrower = server_->config().Get()->proto;  // another trusted peer: accepted
  narrower.mutable_policy()->add_caller_header_trusted_peers("127.0.0.2");
  EXPECT_TRUE(Update(*stub, narrower).ok());

  admin_.reset();
  AdminOptions allowed;
  allowed.allow_policy_off = true;
  StartAdmin(allowed);
  stub = AdminStub(grpc::InsecureChannelCredentials());
  EXPECT_TRUE(Update(*stub, let_in).ok());
  EXPECT_EQ(server_->config().Get()->proto.policy().unknown_callers(),
            egress::v1::UNKNOWN_CALLERS_DEFAULT_POLICY);
}

TEST_F(AccessTest, EveryAdminCallIsLoggedWithThePeerIdentityAndTheFieldsChanged) {
  StartEgress();
  StartAdmin({"", "", pki_->ServerFiles(), "", {"spiffe://test/admin"}});
  auto admin = AdminStub(pki_->Client("admin"));
  auto intruder = AdminStub(pki_->Client("intruder"));
  Config config = server_->config().Get()->proto;
  config.mutable_drain()->set_max_bytes(1000);
  config.mutable_policy()->add_deny_hosts("blocked.test");
  ::testing::internal::CaptureStderr();
  EXPECT_TRUE(Update(*admin, config).ok());
  EXPECT_FALSE(Get(*intruder).ok());
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(log, HasSubstr("egressd: admin UpdateConfig from ipv4:127.0.0.1:"));
  EXPECT_THAT(log, HasSubstr("identity spiffe://test/admin: applied; "
                             "modified: drain.max_bytes: 262144 -> 1000; "
                             "added: policy.deny_hosts[0]: \"blocked.test\""));
  EXPECT_THAT(log, HasSubstr("admin GetConfig from ipv4:127.0.0.1:"));
  EXPECT_THAT(log, HasSubstr("identity spiffe://test/intruder: denied (PERMISSION_DENIED"));
}

// A rejected config's error quotes the bad value; a newline in it must not forge a line.
TEST_F(AccessTest, AConfigValueCannotForgeAnAdminLogLine) {
  StartEgress();
  StartAdmin({});
  auto stub = AdminStub(grpc::InsecureChannelCredentials());
  Config config = server_->config().Get()->proto;
  config.mutable_policy()->add_allow_cidrs("x\negressd: admin UpdateConfig from forged: applied");
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(Update(*stub, config).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(log, HasSubstr("rejected (INVALID_ARGUMENT"));
  EXPECT_THAT(log, HasSubstr("x\\x0aegressd: admin UpdateConfig from forged"));
  EXPECT_THAT(log, Not(HasSubstr("\negressd: admin UpdateConfig from forged")));
}

}  // namespace
}  // namespace egress::testing
