// TLS session resumption: a new connection to an origin resumes the session its server
// gave on an earlier one (TLS 1.2 session tickets, TLS 1.3 tickets), unless configured
// off, and never with a session from another host. nginx's $ssl_session_reused says
// what the server saw; each fetch takes a new connection (Connection: close).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/support/egress_fixture.h"

namespace egress::testing {
namespace {

using egress::v1::FetchResponse;

class TlsResumptionTest : public EgressTest {
 protected:
  static std::string Url(int port, const std::string& host = "localhost") {
    return absl::StrCat("https://", host, ":", port, "/close/1k");
  }

  // Fetches `url` on a new connection, which closes afterwards.
  void FetchOnNewConnection(const std::string& url) {
    FetchResponse response;
    const grpc::Status status = Fetch(Request(url), &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    ASSERT_EQ(response.status_code(), 200);
    EXPECT_FALSE(response.connection().reused());
    EXPECT_EQ(response.body(), NginxUpstream::FileContent("1k"));
    WaitForQuietPool();
  }

  // Whether nginx saw each of the `count` requests resume a session, in order.
  std::vector<bool> ResumedAtServer(size_t count, const std::string& protocol) const {
    std::vector<bool> resumed;
    for (const auto& entry : nginx().TlsRequests(LoggedUri("/close/1k"), count)) {
      EXPECT_EQ(entry.protocol, protocol);
      EXPECT_EQ(entry.connection_requests, 1);
      resumed.push_back(entry.session_reused);
    }
    return resumed;
  }
};

TEST_F(TlsResumptionTest, SecondConnectionResumesTheTls12Session) {
  StartEgress();
  FetchOnNewConnection(Url(nginx().tls12_port()));
  FetchOnNewConnection(Url(nginx().tls12_port()));
  EXPECT_EQ(observer_.tls_full, 1);
  EXPECT_EQ(observer_.tls_resumed, 1);
  EXPECT_EQ(ResumedAtServer(2, "TLSv1.2"), (std::vector<bool>{false, true}));
}

TEST_F(TlsResumptionTest, SecondConnectionResumesTheTls13Session) {
  StartEgress();
  FetchOnNewConnection(Url(nginx().tls13_port()));
  FetchOnNewConnection(Url(nginx().tls13_port()));
  EXPECT_EQ(observer_.tls_full, 1);
  EXPECT_EQ(observer_.tls_resumed, 1);
  EXPECT_EQ(ResumedAtServer(2, "TLSv1.3"), (std::vector<bool>{false, true}));
}

TEST_F(TlsResumptionTest, EveryHandshakeIsFullWhenResumptionIsOff) {
  StartEgress([](egress::v1::Config& c) {
    c.mutable_transport()->mutable_tls_session_resumption()->set_value(false);
  });
  for (int i = 0; i < 3; ++i) FetchOnNewConnection(Url(nginx().tls13_port()));
  EXPECT_EQ(observer_.tls_full, 3);
  EXPECT_EQ(observer_.tls_resumed, 0);
  EXPECT_EQ(ResumedAtServer(3, "TLSv1.3"), (std::vector<bool>{false, false, false}));
}

TEST_F(TlsResumptionTest, AnOriginOverrideTurnsResumptionOffForItsHostOnly) {
  StartEgress([](egress::v1::Config& c) {
    auto* o = c.mutable_transport()->add_origins();
    o->set_host("localhost");
    o->mutable_tls_session_resumption()->set_value(false);
  });
  FetchOnNewConnection(Url(nginx().tls12_port(), "localhost"));
  FetchOnNewConnection(Url(nginx().tls12_port(), "localhost"));
  FetchOnNewConnection(Url(nginx().tls12_port(), "127.0.0.1"));
  FetchOnNewConnection(Url(nginx().tls12_port(), "127.0.0.1"));
  EXPECT_EQ(observer_.tls_full, 3);
  EXPECT_EQ(observer_.tls_resumed, 1);
  EXPECT_EQ(ResumedAtServer(4, "TLSv1.2"), (std::vector<bool>{false, false, false, true}));
}

// The same server under two names: it would resume either's session under the other
// (TLS 1.3 does not tie a session to the SNI name), but a resumed handshake skips the
// certificate check, so a session verified for one host must not reach another.
TEST_F(TlsResumptionTest, ASessionIsNeverOfferedToAnotherHost) {
  StartEgress();
  FetchOnNewConnection(Url(nginx().tls13_port(), "localhost"));
  FetchOnNewConnection(Url(nginx().tls13_port(), "127.0.0.1"));
  FetchOnNewConnection(Url(nginx().tls13_port(), "127.0.0.1"));  // its own session
  EXPECT_EQ(observer_.tls_full, 2);
  EXPECT_EQ(observer_.tls_resumed, 1);
  EXPECT_EQ(ResumedAtServer(3, "TLSv1.3"), (std::vector<bool>{false, false, true}));
}

}  // namespace
}  // namespace egress::testing
