// The egress policy through Fetch: thirty-odd ways to reach an internal address, each
// denied and counted by default and let through once an allow rule names it; redirects;
// per-caller rules. Runs in a network namespace with only loopback up and the test
// /etc/hosts of tests/support/run_in_netns.sh, so an address that slipped through the
// guard could not leave the machine anyway.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "service/base/files.h"
#include "service/config/config.h"
#include "service/server/server_credentials.h"
#include "tests/support/egress_fixture.h"

namespace egress::testing {
namespace {

// Logs and outputs the test reads back (service/base/files.h wants a bound).
constexpr size_t kMaxTestFileBytes = 256 << 20;

using egress::v1::FetchRequest;
using egress::v1::FetchResponse;
using ::testing::HasSubstr;
using transport::DenyReason;

struct Way {
  std::string url;      // port 1: nothing listens there
  DenyReason reason;    // why the default policy denies it
  std::string allow;    // an allow_cidrs rule that names it
};

const std::vector<Way>& Ways() {
  static const std::vector<Way> ways = {
      {"http://127.0.0.1:1/", DenyReason::kLoopback, "127.0.0.0/8"},
      {"http://127.1:1/", DenyReason::kLoopback, "127.0.0.0/8"},
      {"http://2130706433:1/", DenyReason::kLoopback, "127.0.0.0/8"},
      {"http://0x7f000001:1/", DenyReason::kLoopback, "127.0.0.0/8"},
      {"http://0177.0.0.1:1/", DenyReason::kLoopback, "127.0.0.0/8"},
      {"http://0x7f.0.0.1:1/", DenyReason::kLoopback, "127.0.0.0/8"},
      {"http://127.000.000.001:1/", DenyReason::kLoopback, "127.0.0.0/8"},
      {"http://0:1/", DenyReason::kUnspecified, "0.0.0.0/8"},
      {"http://0.0.0.0:1/", DenyReason::kUnspecified, "0.0.0.0/8"},
      {"http://[::1]:1/", DenyReason::kLoopback, "::1/128"},
      {"http://[::]:1/", DenyReason::kUnspecified, "::/128"},
      {"http://[::ffff:127.0.0.1]:1/", DenyReason::kIpv4Embedded, "::ffff:0:0/96"},
      {"http://[::ffff:7f00:1]:1/", DenyReason::kIpv4Embedded, "::ffff:0:0/96"},
      {"http://[0:0:0:0:0:ffff:127.0.0.1]:1/", DenyReason::kIpv4Embedded, "::ffff:0:0/96"},
      {"http://[::ffff:a9fe:a9fe]:1/", DenyReason::kIpv4Embedded, "::ffff:0:0/96"},
      {"http://[::127.0.0.1]:1/", DenyReason::kIpv4Embedded, "::/96"},
      {"http://[64:ff9b::7f00:1]:1/", DenyReason::kIpv4Embedded, "64:ff9b::/96"},
      {"http://[2002:7f00:1::1]:1/", DenyReason::kIpv4Embedded, "2002::/16"},
      {"http://[2001:0:4136:e378:8000:63bf:80ff:fffe]:1/", DenyReason::kIpv4Embedded, "2001::/32"},
      {"http://[fe80::1]:1/", DenyReason::kLinkLocal, "fe80::/10"},
      {"http://[fc00::1]:1/", DenyReason::kUniqueLocal, "fc00::/7"},
      {"http://[fd12:3456::1]:1/", DenyReason::kUniqueLocal, "fc00::/7"},
      {"http://10.0.0.1:1/", DenyReason::kPrivate, "10.0.0.0/8"},
      {"http://172.16.0.1:1/", DenyReason::kPrivate, "172.16.0.0/12"},
      {"http://192.168.1.1:1/", DenyReason::kPrivate, "192.168.0.0/16"},
      {"http://169.254.169.254:1/", DenyReason::kLinkLocal, "169.254.0.0/16"},
      {"http://0251.0376.0251.0376:1/", DenyReason::kLinkLocal, "169.254.0.0/16"},
      {"http://100.64.0.1:1/", DenyReason::kCgnat, "100.64.0.0/10"},
      {"http://224.0.0.1:1/", DenyReason::kMulticast, "224.0.0.0/4"},
      {"http://255.255.255.255:1/", DenyReason::kBroadcast, "255.255.255.255/32"},
      {"http://localhost:1/", DenyReason::kLoopback, "127.0.0.0/8"},
      {"http://loop.test:1/", DenyReason::kLoopback, "127.0.0.0/8"},
      {"http://internal.test:1/", DenyReason::kPrivate, "10.0.0.0/8"},
      {"http://metadata.test:1/", DenyReason::kLinkLocal, "169.254.0.0/16"},
      {"http://allowed.example@127.0.0.1:1/", DenyReason::kLoopback, "127.0.0.0/8"},
      {"http://LoCaLhOsT:1/", DenyReason::kLoopback, "127.0.0.0/8"},
      {"http://0x7f.1:1/", DenyReason::kLoopback, "127.0.0.0/8"},
  };
  return ways;
}

class PolicyTest : public EgressTest {
 protected:
  grpc::Status FetchWithTimeout(const std::string& url, FetchResponse* response) {
    FetchRequest request;
    request.set_url(url);
    request.mutable_timeout()->set_seconds(3);
    return Fetch(request, response);
  }
};

TEST_F(PolicyTest, EveryWayToAnInternalAddressIsDeniedAndCounted) {
  StartEgress([](egress::v1::Config& c) { c.clear_policy(); });  // the default policy
  ASSERT_GE(Ways().size(), 30u);
  int denied = 0;
  for (const Way& way : Ways()) {
    FetchResponse response;
    const grpc::Status status = FetchWithTimeout(way.url, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED)
        << way.url << ": " << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr("egress policy denies")) << way.url;
    EXPECT_THAT(status.error_message(), HasSubstr(std::string(ToString(way.reason)))) << way.url;
    EXPECT_EQ(observer_.AllDenied(), ++denied) << way.url;
  }
  EXPECT_EQ(observer_.opened, 0);
  EXPECT_EQ(observer_.Fetches(grpc::StatusCode::PERMISSION_DENIED), denied);
}

TEST_F(PolicyTest, EachWayIsLetThroughOnceAnAllowRuleNamesIt) {
  for (const Way& way : Ways()) {
    const int denied_before = observer_.AllDenied();
    StartEgress([&](egress::v1::Config& c) {
      c.clear_policy();
      c.mutable_policy()->add_allow_cidrs(way.allow);
    });
    FetchResponse response;
    const grpc::Status status = FetchWithTimeout(way.url, &response);
    // Allowed: the connection is attempted and fails (nothing listens; no route).
    EXPECT_NE(status.error_code(), grpc::StatusCode::PERMISSION_DENIED)
        << way.url << ": " << status.error_message();
    EXPECT_EQ(observer_.AllDenied(), denied_before) << way.url;
    server_.reset();
  }
}

TEST_F(PolicyTest, DenyRulesBeatAllowRulesAndHostPatternsWork) {
  StartEgress([](egress::v1::Config& c) {
    c.clear_policy();
    c.mutable_policy()->add_allow_hosts("*.test");
    c.mutable_policy()->add_deny_hosts("metadata.test");
    c.mutable_policy()->add_deny_cidrs("10.1.2.0/24");
  });
  FetchResponse response;
  // allow_hosts lets loop.test through to loopback (nothing listens: UNAVAILABLE).
  EXPECT_EQ(FetchWithTimeout("http://loop.test:1/", &response).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  const grpc::Status by_host = FetchWithTimeout("http://metadata.test:1/", &response);
  EXPECT_EQ(by_host.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(by_host.error_message(), HasSubstr("matches policy.deny_hosts"));
  const grpc::Status by_cidr = FetchWithTimeout("http://internal.test:1/", &response);
  EXPECT_EQ(by_cidr.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(by_cidr.error_message(), HasSubstr("is in policy.deny_cidrs"));
  EXPECT_EQ(observer_.Denied(DenyReason::kHostDenied), 1);
  EXPECT_EQ(observer_.Denied(DenyReason::kCidrDenied), 1);
}

// An address in deny_hosts is denied in every spelling of it, as the address rules
// are, and its neighbour is not (the fixture allows 127.0.0.0/8: nothing listens on
// port 1, so an allowed fetch is UNAVAILABLE).
TEST_F(PolicyTest, AnAddressInDenyHostsIsDeniedInEverySpellingOfIt) {
  StartEgress([](egress::v1::Config& c) { c.mutable_policy()->add_deny_hosts("127.0.0.1"); });
  const std::vector<std::string> spellings = {"127.0.0.1",  "127.1",      "2130706433",
                                              "0x7f000001", "0177.0.0.1", "[::ffff:127.0.0.1]"};
  for (const std::string& host : spellings) {
    FetchResponse response;
    const grpc::Status status = FetchWithTimeout(absl::StrCat("http://", host, ":1/"), &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED)
        << host << ": " << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr("matches policy.deny_hosts")) << host;
  }
  EXPECT_EQ(observer_.Denied(DenyReason::kHostDenied), static_cast<int>(spellings.size()));
  FetchResponse response;
  EXPECT_EQ(FetchWithTimeout("http://127.2:1/", &response).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(observer_.opened, 0);
}

// allow_hosts opens names only: an address there is refused at load, and the message
// names the allow_cidrs entry to write instead.
TEST_F(PolicyTest, AnAddressInAllowHostsIsRefusedAtLoadPointingToAllowCidrs) {
  for (const char* address : {"127.0.0.1", "0x7f000001", "[::1]"}) {
    egress::v1::Config proto;
    proto.mutable_policy()->add_allow_hosts("api.example.com");
    proto.mutable_policy()->add_allow_hosts(address);
    const auto config = BuildConfig(proto);
    ASSERT_FALSE(config.ok()) << address;
    EXPECT_THAT(std::string(config.status().message()),
                HasSubstr("policy.allow_hosts[1]: \"" + std::string(address) +
                          "\" is an IP address, and allow_hosts opens names only; allow an "
                          "address with policy.allow_cidrs"))
        << address;
  }
}

TEST_F(PolicyTest, RedirectsAreNotFollowedUnlessAsked) {
  StartEgress();
  FetchRequest request = Request(nginx().HttpUrl("/redirect-relative"));
  FetchResponse response;
  ASSERT_TRUE(Fetch(request, &response).ok());
  EXPECT_EQ(response.status_code(), 302);

  request.set_follow_redirects(true);
  ASSERT_TRUE(Fetch(request, &response).ok());
  EXPECT_EQ(response.status_code(), 200);
  EXPECT_EQ(response.body(), NginxUpstream::FileContent("1k"));
}

TEST_F(PolicyTest, EveryRedirectHopIsCheckedAgain) {
  StartEgress([](egress::v1::Config& c) {
    c.clear_policy();
    c.mutable_policy()->add_allow_hosts("redirector.test");  // 127.0.0.2 by name only
  });
  FetchRequest request;
  request.set_url(absl::StrCat("http://redirector.test:", nginx().http_port(), "/redirect-internal"));
  FetchResponse response;
  ASSERT_TRUE(Fetch(request, &response).ok());  // the first hop is allowed
  EXPECT_EQ(response.status_code(), 302);
  request.set_follow_redirects(true);
  const grpc::Status status = Fetch(request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(status.error_message(), HasSubstr("http://127.0.0.1:"));
  EXPECT_EQ(observer_.Denied(DenyReason::kLoopback), 1);
}

TEST_F(PolicyTest, RedirectHopsAreBounded) {
  StartEgress();
  FetchRequest request = Request(nginx().HttpUrl("/redirect-loop"));
  request.set_follow_redirects(true);
  FetchResponse response;
  const grpc::Status status = Fetch(request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(status.error_message(), HasSubstr("stopped after 5 redirects"));
}

TEST_F(PolicyTest, CallerRulesLimitThatCallerOnly) {
  StartEgress([](egress::v1::Config& c) {
    c.mutable_policy()->set_caller_header("x-egress-caller");
    c.mutable_policy()->add_caller_header_trusted_peers("127.0.0.1");  // the test's own calls
    auto* rule = c.mutable_policy()->add_callers();
    rule->set_identity("billing");
    rule->add_allowed_hosts("localhost");
  });
  auto fetch_as = [&](const std::string& caller, const std::string& url) {
    grpc::ClientContext context;
    if (!caller.empty()) context.AddMetadata("x-egress-caller", caller);
    FetchResponse response;
    return stub_->Fetch(&context, Request(url), &response);
  };
  EXPECT_TRUE(fetch_as("billing", nginx().HttpsUrl("/cl/1k")).ok());
  const grpc::Status denied = fetch_as("billing", nginx().HttpUrl("/cl/1k"));  // 127.0.0.1
  EXPECT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(denied.error_message(), HasSubstr("caller \"billing\""));
  EXPECT_TRUE(fetch_as("search", nginx().HttpUrl("/cl/1k")).ok());  // no rule: default
  EXPECT_TRUE(fetch_as("", nginx().HttpUrl("/cl/1k")).ok());
  EXPECT_EQ(observer_.Denied(DenyReason::kCallerNotAllowed), 1);
}

std::string Read(const std::string& path) { return *ReadBoundedFile(path, kMaxTestFileBytes); }

// Served over mTLS, a caller is known by its certificate (no header to trust).
TEST_F(PolicyTest, CallerIsIdentifiedByItsClientCertificateOverMtls) {
  egress::v1::Config proto;
  proto.mutable_transport()->set_extra_ca_file(nginx().ca_file());
  proto.mutable_policy()->add_allow_cidrs("127.0.0.0/8");
  proto.mutable_policy()->set_identity_source(egress::v1::IDENTITY_SOURCE_COMMON_NAME);
  auto* rule = proto.mutable_policy()->add_callers();
  rule->set_identity("egress-client");
  rule->add_allowed_hosts("localhost");
  auto config = BuildConfig(proto);
  ASSERT_TRUE(config.ok()) << config.status();
  auto credentials = LoadServerCredentials(
      {nginx().server_cert_file(), nginx().server_key_file(), nginx().ca_file()}, "--grpc_tls");
  ASSERT_TRUE(credentials.ok()) << credentials.status();
  auto server = EgressServer::Start(*config, "127.0.0.1:0", observer_, observer_, *credentials);
  ASSERT_TRUE(server.ok()) << server.status();

  grpc::SslCredentialsOptions client;
  client.pem_root_certs = Read(nginx().ca_file());
  client.pem_cert_chain = Read(nginx().client_cert_file());
  client.pem_private_key = Read(nginx().client_key_file());
  auto stub = egress::v1::Egress::NewStub(grpc::CreateChannel(
      absl::StrCat("localhost:", (*server)->grpc_port()), grpc::SslCredentials(client)));
  auto fetch = [&](const std::string& url) {
    grpc::ClientContext context;
    FetchResponse response;
    return stub->Fetch(&context, Request(url), &response);
  };
  EXPECT_TRUE(fetch(nginx().HttpsUrl("/cl/1k")).ok());
  const grpc::Status denied = fetch(nginx().HttpUrl("/cl/1k"));
  EXPECT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(denied.error_message(), HasSubstr("caller \"egress-client\""));

  // Without a client certificate the call does not get in at all.
  grpc::SslCredentialsOptions anonymous;
  anonymous.pem_root_certs = Read(nginx().ca_file());
  auto anonymous_stub = egress::v1::Egress::NewStub(grpc::CreateChannel(
      absl::StrCat("localhost:", (*server)->grpc_port()), grpc::SslCredentials(anonymous)));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  FetchResponse response;
  EXPECT_FALSE(anonymous_stub->Fetch(&context, Request(nginx().HttpsUrl("/cl/1k")), &response).ok());
}

}  // namespace
}  // namespace egress::testing
