// End to end: the egressd binary in its own process and a real nginx upstream, called
// from every client we ship: the C++ EgressClient, egressctl, Python, Node, Go and Java.
// Each checks status, headers, body bytes, connection reuse on a repeated call, that a bad
// request arrives as INVALID_ARGUMENT, and that a policy denial shows its
// google.rpc.ErrorInfo: reason POLICY_DENIED, the rule and the host.
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/egress_client.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/support/egressd_process.h"
#include "tests/support/http_get.h"
#include "tests/support/nginx_upstream.h"

namespace egress::testing {
namespace {

using google::protobuf::Struct;

// A loopback address outside the policy's allow_cidrs (127.0.0.0/8): egressd denies it
// by default, before any connection.
constexpr char kDeniedUrl[] = "http://[::1]:1/";
constexpr char kDeniedHost[] = "::1";

// egressctl built with TSan (whose gRPC is not instrumented) fails some plaintext
// connects with a stray errno ("connect failed ... No such file or directory", errno 2,
// from gRPC's tcp_client_posix) while Python reaches the same listener; seen on the
// admin listener only. Those steps run in the default and ASan builds.
bool EgressctlIsTsanBuilt() {
  const char* sanitizer = std::getenv("EGRESS_TEST_SANITIZER");
  return sanitizer && std::string(sanitizer) == "thread";
}

// One JSON object per line.
std::vector<Struct> JsonLines(const std::string& text) {
  std::vector<Struct> lines;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    Struct object;
    EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(std::string(line), &object).ok())
        << line;
    lines.push_back(object);
  }
  return lines;
}

std::string Field(const Struct& object, const std::string& name) {
  const auto it = object.fields().find(name);
  if (it == object.fields().end()) return "";
  if (it->second.has_bool_value()) return it->second.bool_value() ? "true" : "false";
  if (it->second.has_number_value()) return absl::StrCat(it->second.number_value());
  return it->second.string_value();
}

// The object `name` of `object`, empty when there is none.
const Struct& Object(const Struct& object, const std::string& name) {
  const auto it = object.fields().find(name);
  return it == object.fields().end() ? Struct::default_instance() : it->second.struct_value();
}

// The metadata value `key` of `info`, or "".
std::string Metadata(const google::rpc::ErrorInfo& info, const std::string& key) {
  const auto it = info.metadata().find(key);
  return it == info.metadata().end() ? "" : it->second;
}

class ClientsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const char* tmp = std::getenv("TEST_TMPDIR");
    dir_ = absl::StrCat(tmp ? tmp : "/tmp", "/clients-test-", getpid());
    nginx_ = NginxUpstream::Start(dir_ + "/nginx");
    std::ofstream(dir_ + "/egress.textproto")
        << "transport { extra_ca_file: \"" << nginx_->ca_file() << "\" }\n"
        << "policy { allow_cidrs: \"127.0.0.0/8\" }  # the test upstream\n";
    egressd_ = std::make_unique<EgressdProcess>(
        Runfile("service/egressd"), dir_ + "/egress.textproto", dir_ + "/egressd.log");
    ASSERT_TRUE(egressd_->WaitUntilListening());
    StartGuardedEgressd();
  }
  static void TearDownTestSuite() {
    guarded_.reset();
    egressd_.reset();
    nginx_.reset();
  }

  // A second egressd, locked down: Egress over TLS, the admin service over mTLS and a
  // bearer token, callers named by metadata. nginx's test PKI serves: its CA signed a
  // certificate for 127.0.0.1 and a client certificate.
  static std::string GuardedConfig(const std::string& extra = "") {
    return absl::StrCat("transport { extra_ca_file: \"", nginx_->ca_file(), "\" }\n",
                        "policy { allow_cidrs: \"127.0.0.0/8\" caller_header: \"x-egress-caller\"",
                        " caller_header_trusted_peers: \"127.0.0.1\"",
                        " callers { identity: \"billing\" allowed_hosts: \"localhost\" } }\n",
                        extra);
  }
  static void StartGuardedEgressd() {
    std::ofstream(dir_ + "/guarded.textproto") << GuardedConfig();
    std::ofstream(dir_ + "/admin.token") << "s3cret-token\n";
    guarded_ = std::make_unique<EgressdProcess>(
        Runfile("service/egressd"), dir_ + "/guarded.textproto", dir_ + "/guarded.log",
        std::vector<std::string>{
            "--grpc_tls_cert=" + nginx_->server_cert_file(),
            "--grpc_tls_key=" + nginx_->server_key_file(),
            "--admin_tls_cert=" + nginx_->server_cert_file(),
            "--admin_tls_key=" + nginx_->server_key_file(),
            "--admin_tls_client_ca=" + nginx_->ca_file(),
            "--admin_token_file=" + dir_ + "/admin.token"});
    ASSERT_TRUE(guarded_->WaitUntilListening());
  }
  // egressctl for the guarded egressd with `flags` (e.g. the TLS ones).
  static std::string GuardedEgressctl(const std::string& flags) {
    return absl::StrCat(Runfile("client/egressctl"), " --target=", guarded_->grpc_target(),
                        " --admin=", guarded_->admin_target(), " ", flags, " ");
  }
  static std::string MtlsFlags() {
    return absl::StrCat("--tls --ca=", nginx_->ca_file(), " --cert=", nginx_->client_cert_file(),
                        " --key=", nginx_->client_key_file());
  }
  static std::string TokenFlag() { return absl::StrCat("--token-file=", dir_, "/admin.token"); }
  // The arguments check_tls_python.py and check_tls_node.js take after their first.
  static std::string GuardedCheckArgs() {
    return absl::StrCat(guarded_->grpc_target(), " ", guarded_->admin_target(), " ",
                        nginx_->ca_file(), " ", nginx_->client_cert_file(), " ",
                        nginx_->client_key_file(), " ", dir_, "/admin.token ", Url(),
                        " https://127.0.0.1:", nginx_->https_port(), "/cl/4k");
  }

  static std::string Target() { return egressd_->grpc_target(); }
  static std::string Url() { return nginx_->HttpsUrl("/cl/4k"); }
  // A body over gRPC's default message limit of 4 MiB, which a client must raise, and
  // over egressd's default max_body_bytes: every client asks for up to 8 MiB.
  static std::string LargeUrl() { return nginx_->HttpsUrl("/cl/6m"); }

  // Two fetches of Url(), one of a malformed URL, one of LargeUrl() and one of
  // kDeniedUrl, as a client printed them.
  static void ExpectFetchesAndErrors(const std::vector<Struct>& calls) {
    ASSERT_EQ(calls.size(), 5u);
    for (const Struct& call : {calls[0], calls[1]}) {
      EXPECT_EQ(Field(call, "status"), "200");
      EXPECT_EQ(Field(call, "content_length"), "4096");
      std::string body;
      ASSERT_TRUE(absl::Base64Unescape(Field(call, "body"), &body));
      EXPECT_EQ(body, NginxUpstream::FileContent("4k"));
    }
    EXPECT_EQ(Field(calls[1], "reused"), "true");
    EXPECT_EQ(Field(calls[1], "connection_id"), Field(calls[0], "connection_id"));
    EXPECT_EQ(Field(calls[2], "error"), "INVALID_ARGUMENT");
    EXPECT_NE(Field(calls[2], "message"), "");
    EXPECT_EQ(Field(calls[3], "large_status"), "200") << Field(calls[3], "error");
    EXPECT_EQ(Field(calls[3], "large_bytes"), absl::StrCat(6 << 20));
    EXPECT_EQ(Field(calls[4], "error"), "PERMISSION_DENIED");
    EXPECT_EQ(Field(calls[4], "reason"), "POLICY_DENIED") << Field(calls[4], "message");
    EXPECT_EQ(Field(calls[4], "domain"), "egress.v1");
    EXPECT_NE(Field(calls[4], "rule"), "");
    EXPECT_EQ(Field(calls[4], "host"), kDeniedHost);
  }

  // What check_python.py prints (`flags` "--asyncio": through the asyncio client), with
  // egress_client's stubs generated into `stubs` first; `status` is the script's.
  static std::string CheckPython(const std::string& stubs, const std::string& flags,
                                 int* status) {
    RunShell(absl::StrCat(Runfile("client/python/generate.sh"), " ", stubs), status);
    if (*status != 0) return "generate.sh failed";
    return RunShell(absl::StrCat("/usr/bin/python3 ", Runfile("tests/e2e/check_python.py"), " ",
                                 stubs, " ", Runfile("client/python"), " ", Target(), " ", Url(),
                                 " ", LargeUrl(), " '", kDeniedUrl, "' ", flags),
                    status);
  }

  static inline std::string dir_;
  static inline std::unique_ptr<NginxUpstream> nginx_;
  static inline std::unique_ptr<EgressdProcess> egressd_;
  static inline std::unique_ptr<EgressdProcess> guarded_;
};

TEST_F(ClientsTest, CppClientFetchesReusesAndMapsErrors) {
  client::ClientOptions options;
  options.target = Target();
  options.admin_target = egressd_->admin_target();
  const client::EgressClient egress(options);
  auto first = egress.Fetch(Url());
  auto second = egress.Fetch(Url());
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->status_code(), 200);
  EXPECT_EQ(second->body(), NginxUpstream::FileContent("4k"));
  EXPECT_TRUE(second->connection().reused());
  EXPECT_EQ(second->connection().connection_id(), first->connection().connection_id());

  client::FetchOptions head_only;
  head_only.body_mode = client::BodyMode::kHeadOnly;
  auto head = egress.Fetch(Url(), head_only);
  ASSERT_TRUE(head.ok()) << head.status();
  EXPECT_EQ(head->body(), "");

  client::FetchOptions large_options;
  large_options.max_body_bytes = 8 << 20;  // over egressd's default: see LargeUrl
  auto large = egress.Fetch(LargeUrl(), large_options);
  ASSERT_TRUE(large.ok()) << large.status();
  EXPECT_EQ(large->body(), NginxUpstream::FileContent("6m"));

  std::string streamed;
  auto streamed_head = egress.FetchStream(Url(), {}, [&](absl::string_view chunk) {
    streamed.append(chunk.data(), chunk.size());
    return true;
  });
  ASSERT_TRUE(streamed_head.ok()) << streamed_head.status();
  EXPECT_EQ(streamed_head->status_code(), 200);
  EXPECT_EQ(streamed, NginxUpstream::FileContent("4k"));

  EXPECT_TRUE(absl::IsInvalidArgument(egress.Fetch("not a url").status()));
  client::FetchOptions bad_header;
  bad_header.headers = {{"X-Evil", "a\r\nInjected: yes"}};
  EXPECT_TRUE(absl::IsInvalidArgument(egress.Fetch(Url(), bad_header).status()));

  const absl::Status denied = egress.Fetch(kDeniedUrl).status();
  EXPECT_TRUE(absl::IsPermissionDenied(denied)) << denied;
  const auto info = client::ErrorInfoOf(denied);
  ASSERT_TRUE(info.has_value()) << denied;
  EXPECT_EQ(info->reason(), "POLICY_DENIED");
  EXPECT_EQ(info->domain(), "egress.v1");
  EXPECT_NE(Metadata(*info, "rule"), "");
  EXPECT_EQ(Metadata(*info, "host"), kDeniedHost);

  auto config = egress.GetConfig();
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->transport().extra_ca_file(), nginx_->ca_file());
  auto pools = egress.GetPoolStats();
  ASSERT_TRUE(pools.ok()) << pools.status();
  EXPECT_GE(pools->origins_size(), 1);
}

TEST_F(ClientsTest, EgressctlFetchesAsJsonAndReusesTheConnection) {
  const std::string egressctl =
      absl::StrCat(Runfile("client/egressctl"), " --target=", Target(),
                   " --admin=", egressd_->admin_target());
  std::vector<egress::v1::FetchResponse> responses(2);
  for (auto& response : responses) {
    int status = -1;
    const std::string json = RunShell(egressctl + " --json fetch " + Url(), &status);
    ASSERT_EQ(status, 0) << json;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json, &response).ok()) << json;
  }
  EXPECT_EQ(responses[1].status_code(), 200);
  EXPECT_EQ(responses[1].body(), NginxUpstream::FileContent("4k"));
  EXPECT_TRUE(responses[1].connection().reused());

  int status = -1;
  const std::string human =
      RunShell(egressctl + " fetch --head-only -H 'X-Trace: 1' " + Url() + " 2>/dev/null", &status);
  EXPECT_EQ(status, 0);
  EXPECT_EQ(human.rfind("HTTP 200\n", 0), 0u) << human;
  EXPECT_NE(human.find("Content-Length: 4096\n"), std::string::npos) << human;

  // The issue's spelling, "--prefix N": only the first N body bytes come back.
  const std::string prefix_json =
      RunShell(egressctl + " --json fetch --prefix 5 " + Url(), &status);
  ASSERT_EQ(status, 0) << prefix_json;
  egress::v1::FetchResponse prefix;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(prefix_json, &prefix).ok())
      << prefix_json;
  EXPECT_EQ(prefix.body(), NginxUpstream::FileContent("4k").substr(0, 5));

  const std::string error = RunShell(egressctl + " fetch 'not a url' 2>&1", &status);
  EXPECT_EQ(WEXITSTATUS(status), 1);
  EXPECT_NE(error.find("INVALID_ARGUMENT"), std::string::npos) << error;
  // A denial names its reason, rule and host, for people and as JSON.
  const std::string denied =
      RunShell(absl::StrCat(egressctl, " fetch '", kDeniedUrl, "' 2>&1"), &status);
  EXPECT_EQ(WEXITSTATUS(status), 1);
  EXPECT_NE(denied.find("PERMISSION_DENIED: "), std::string::npos) << denied;
  EXPECT_NE(denied.find(" [POLICY_DENIED "), std::string::npos) << denied;
  EXPECT_NE(denied.find(" rule="), std::string::npos) << denied;
  EXPECT_NE(denied.find(absl::StrCat(" host=", kDeniedHost)), std::string::npos) << denied;
  const std::string denied_json =
      RunShell(absl::StrCat(egressctl, " --json fetch '", kDeniedUrl, "' 2>/dev/null"), &status);
  EXPECT_EQ(WEXITSTATUS(status), 1);
  Struct parsed_denial;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(denied_json, &parsed_denial).ok())
      << denied_json;
  const Struct& denial = Object(parsed_denial, "error");
  EXPECT_EQ(Field(denial, "code"), "PERMISSION_DENIED");
  EXPECT_EQ(Field(denial, "reason"), "POLICY_DENIED") << denied_json;
  EXPECT_NE(Field(Object(denial, "metadata"), "rule"), "") << denied_json;
  EXPECT_EQ(Field(Object(denial, "metadata"), "host"), kDeniedHost) << denied_json;
  RunShell(egressctl + " fetch 2>/dev/null", &status);
  EXPECT_EQ(WEXITSTATUS(status), 2);

  if (EgressctlIsTsanBuilt()) return;  // the admin steps below: see EgressctlIsTsanBuilt
  const std::string pools = RunShell(egressctl + " pools", &status);
  EXPECT_EQ(status, 0);
  EXPECT_NE(pools.find(absl::StrCat("https://localhost:", nginx_->https_port())),
            std::string::npos) << pools;
  const std::string config = RunShell(egressctl + " --json config get", &status);
  EXPECT_EQ(status, 0);
  egress::v1::Config parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(config, &parsed).ok()) << config;
  EXPECT_EQ(parsed.transport().extra_ca_file(), nginx_->ca_file());
}

TEST_F(ClientsTest, EgressctlSetsTheConfigFromAFile) {
  if (EgressctlIsTsanBuilt()) GTEST_SKIP() << "see EgressctlIsTsanBuilt";
  std::ofstream(dir_ + "/new.textproto")
      << "transport { extra_ca_file: \"" << nginx_->ca_file() << "\" max_idle_per_origin: 7 }\n"
      << "policy { allow_cidrs: \"127.0.0.0/8\" }\n";
  int status = -1;
  const std::string in_force =
      RunShell(absl::StrCat(Runfile("client/egressctl"), " --admin=", egressd_->admin_target(),
                       " config set ", dir_, "/new.textproto"),
          &status);
  EXPECT_EQ(status, 0);
  EXPECT_NE(in_force.find("max_idle_per_origin: 7"), std::string::npos) << in_force;
}

TEST_F(ClientsTest, EgressctlDryRunShowsWhatAProposedPolicyWouldNewlyDeny) {
  if (EgressctlIsTsanBuilt()) GTEST_SKIP() << "see EgressctlIsTsanBuilt";
  client::ClientOptions options;
  options.target = Target();
  const client::EgressClient egress(options);
  ASSERT_TRUE(egress.Fetch(Url()).ok());  // a decision allowed by 127.0.0.0/8
  // The same config with loopback no longer allowed: that fetch would be denied.
  std::ofstream(dir_ + "/narrower.textproto")
      << "transport { extra_ca_file: \"" << nginx_->ca_file() << "\" }\n"
      << "policy { allow_cidrs: \"10.0.0.0/8\" }\n";
  const std::string egressctl = absl::StrCat(Runfile("client/egressctl"),
                                             " --admin=", egressd_->admin_target());
  int status = -1;
  const std::string text =
      RunShell(absl::StrCat(egressctl, " config dry-run ", dir_, "/narrower.textproto 2>&1"),
               &status);
  EXPECT_EQ(status, 0) << text;
  EXPECT_EQ(text.rfind("replayed ", 0), 0u) << text;
  EXPECT_EQ(text.find("newly denied: 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find(absl::StrCat("https://localhost:", nginx_->https_port())),
            std::string::npos)
      << text;
  // Nothing was applied: the policy in force still allows the fetch.
  EXPECT_TRUE(egress.Fetch(Url()).ok());

  const std::string json = RunShell(
      absl::StrCat(egressctl, " --json config dry-run ", dir_, "/narrower.textproto"), &status);
  EXPECT_EQ(status, 0) << json;
  egress::v1::DryRunConfigResponse answer;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json, &answer).ok()) << json;
  // Other tests' callers fetched it too: the anonymous caller's entry has these two.
  const std::string origin = absl::StrCat("https://localhost:", nginx_->https_port());
  uint64_t fetches = 0;
  for (const auto& change : answer.newly_denied()) {
    if (change.origin() == origin && change.caller().empty()) {
      fetches = change.fetches();
      EXPECT_EQ(change.previous_rule(), "allow_cidrs:127.0.0.0/8");
    }
  }
  EXPECT_GE(fetches, 2u) << json;
}

TEST_F(ClientsTest, EgressctlReachesAnAdminListenerWithMtlsAndAToken) {
  const std::string egressctl = GuardedEgressctl(MtlsFlags() + " " + TokenFlag());
  int status = -1;
  const std::string config = RunShell(egressctl + "config get 2>&1", &status);
  EXPECT_EQ(status, 0) << config;
  EXPECT_NE(config.find("caller_header: \"x-egress-caller\""), std::string::npos) << config;
  const std::string pools = RunShell(egressctl + "pools 2>&1", &status);
  EXPECT_EQ(status, 0) << pools;
  EXPECT_EQ(pools.rfind("origin ", 0), 0u) << pools;

  const std::string no_token =
      RunShell(GuardedEgressctl(MtlsFlags()) + "config get 2>&1", &status);
  EXPECT_EQ(WEXITSTATUS(status), 1) << no_token;
  EXPECT_NE(no_token.find("UNAUTHENTICATED"), std::string::npos) << no_token;
  const std::string plaintext = RunShell(GuardedEgressctl(TokenFlag()) + "pools 2>&1", &status);
  EXPECT_EQ(WEXITSTATUS(status), 1) << plaintext;
  EXPECT_NE(plaintext.find("UNAVAILABLE"), std::string::npos) << plaintext;
  const std::string no_such_ca =
      RunShell(GuardedEgressctl("--ca=" + dir_ + "/no-such-ca.pem") + "pools 2>&1", &status);
  EXPECT_EQ(WEXITSTATUS(status), 2) << no_such_ca;
  EXPECT_NE(no_such_ca.find("no-such-ca.pem"), std::string::npos) << no_such_ca;
}

TEST_F(ClientsTest, EgressctlFetchesOverTlsAsANamedCaller) {
  const std::string egressctl = GuardedEgressctl("--tls --ca=" + nginx_->ca_file());
  int status = -1;
  const std::string fetched = RunShell(egressctl + "--caller=billing fetch " + Url() + " 2>&1", &status);
  EXPECT_EQ(status, 0) << fetched;
  EXPECT_EQ(fetched.rfind("HTTP 200\n", 0), 0u) << fetched;
  // billing may reach only "localhost": the caller identity arrived.
  const std::string other_host = absl::StrCat("https://127.0.0.1:", nginx_->https_port(), "/cl/4k");
  const std::string denied =
      RunShell(egressctl + "--caller=billing fetch " + other_host + " 2>&1", &status);
  EXPECT_EQ(WEXITSTATUS(status), 1) << denied;
  EXPECT_NE(denied.find("PERMISSION_DENIED"), std::string::npos) << denied;
  const std::string anonymous = RunShell(egressctl + "fetch " + other_host + " 2>&1", &status);
  EXPECT_EQ(status, 0) << anonymous;
}

TEST_F(ClientsTest, CppClientSpeaksTlsWithATokenAndCallerMetadata) {
  client::ClientOptions options;
  options.target = guarded_->grpc_target();
  options.admin_target = guarded_->admin_target();
  options.tls.ca_file = nginx_->ca_file();
  options.admin_tls = {true, nginx_->ca_file(), nginx_->client_cert_file(),
                       nginx_->client_key_file(), ""};
  options.admin_token = "s3cret-token";
  options.metadata = {{"x-egress-caller", "billing"}};
  auto egress = client::EgressClient::Create(options);
  ASSERT_TRUE(egress.ok()) << egress.status();
  auto config = (*egress)->GetConfig();
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->policy().caller_header(), "x-egress-caller");
  auto fetched = (*egress)->Fetch(Url());
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  EXPECT_EQ(fetched->status_code(), 200);
  const auto denied =
      (*egress)->Fetch(absl::StrCat("https://127.0.0.1:", nginx_->https_port(), "/cl/4k"));
  EXPECT_TRUE(absl::IsPermissionDenied(denied.status())) << denied.status();

  options.admin_tls.key_file = dir_ + "/no-such.key";
  const auto unreadable = client::EgressClient::Create(options);
  EXPECT_TRUE(absl::IsInvalidArgument(unreadable.status())) << unreadable.status();
  EXPECT_NE(unreadable.status().message().find("no-such.key"), absl::string_view::npos);
}

TEST_F(ClientsTest, MaxOriginLabelsChangesAtRunTimeThroughEgressctl) {
  std::ofstream(dir_ + "/labels.textproto") << GuardedConfig("metrics { max_origin_labels: 3 }\n");
  int status = -1;
  const std::string in_force = RunShell(GuardedEgressctl(MtlsFlags() + " " + TokenFlag()) +
                                            "config set " + dir_ + "/labels.textproto 2>&1",
                                        &status);
  EXPECT_EQ(status, 0) << in_force;
  EXPECT_NE(in_force.find("max_origin_labels: 3"), std::string::npos) << in_force;
  auto page = HttpGet(guarded_->metrics_port(), "/metrics");
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_NE(page->body.find("egress_origin_labels{state=\"limit\"} 3\n"), std::string::npos)
      << page->body;
}

// What check_tls_python.py and check_tls_node.js print against the guarded egressd.
void ExpectGuardedCalls(const std::vector<Struct>& calls) {
  ASSERT_EQ(calls.size(), 5u);
  EXPECT_EQ(Field(calls[0], "caller_header"), "x-egress-caller");
  EXPECT_EQ(Field(calls[1], "error"), "");
  EXPECT_EQ(Field(calls[2], "status"), "200");
  EXPECT_EQ(Field(calls[3], "error"), "PERMISSION_DENIED");  // billing may reach localhost only
  EXPECT_EQ(Field(calls[4], "error"), "UNAUTHENTICATED");
}

TEST_F(ClientsTest, PythonClientFetchesReusesAndMapsErrors) {
  int status = -1;
  const std::string stubs = dir_ + "/python-stubs";
  const std::string output = CheckPython(stubs, "", &status);
  ASSERT_EQ(status, 0) << output;
  ExpectFetchesAndErrors(JsonLines(output));

  const std::string guarded =
      RunShell(absl::StrCat("/usr/bin/python3 ", Runfile("tests/e2e/check_tls_python.py"), " ",
                            stubs, " ", Runfile("client/python"), " ", GuardedCheckArgs()),
               &status);
  ASSERT_EQ(status, 0) << guarded;
  ExpectGuardedCalls(JsonLines(guarded));

  // The README's example, as printed there.
  const std::string example = RunShell(
      absl::StrCat("PYTHONPATH=", stubs, ":", Runfile("client/python"), " /usr/bin/python3 ",
                   Runfile("client/python/examples/example.py"), " ", Url(), " ", Target()),
      &status);
  EXPECT_EQ(status, 0) << example;
  EXPECT_NE(example.find("fetch 2: HTTP 200"), std::string::npos) << example;
  EXPECT_NE(example.find("reused True"), std::string::npos) << example;
}

TEST_F(ClientsTest, PythonAsyncioClientFetchesReusesAndMapsErrors) {
  int status = -1;
  const std::string output = CheckPython(dir_ + "/python-asyncio-stubs", "--asyncio", &status);
  ASSERT_EQ(status, 0) << output;
  ExpectFetchesAndErrors(JsonLines(output));
}

TEST_F(ClientsTest, NodeClientFetchesReusesAndMapsErrors) {
  const char* npm_dir = std::getenv("EGRESS_NPM_DIR");
  int status = -1;
  const std::string node_env =
      absl::StrCat("NODE_PATH=", npm_dir ? npm_dir : "/opt/egress-npm", "/node_modules ",
                   "EGRESS_PROTO_ROOT=", Runfile("proto"), " ");
  const std::string output = RunShell(
      absl::StrCat(node_env, "node ", Runfile("tests/e2e/check_node.js"), " ",
                   Runfile("client/node"), " ", Target(), " ", Url(), " ", LargeUrl(), " '",
                   kDeniedUrl, "'"),
      &status);
  ASSERT_EQ(status, 0) << output;
  ExpectFetchesAndErrors(JsonLines(output));
  const std::string guarded = RunShell(
      absl::StrCat(node_env, "node ", Runfile("tests/e2e/check_tls_node.js"), " ",
                   Runfile("client/node"), " ", GuardedCheckArgs()),
      &status);
  ASSERT_EQ(status, 0) << guarded;
  ExpectGuardedCalls(JsonLines(guarded));

  const std::string example = RunShell(
      absl::StrCat(node_env, "node ", Runfile("client/node/example.js"), " ", Url(), " ",
                   Target()),
      &status);
  EXPECT_EQ(status, 0) << example;
  EXPECT_NE(example.find("fetch 2: HTTP 200"), std::string::npos) << example;
  EXPECT_NE(example.find("reused true"), std::string::npos) << example;
}

// The environment of an offline Go build in the GOPATH client/go/generate.sh made in
// `gopath`: Debian's Go sources, no module mode, no proxy. Go's build cache is the one
// the machine's test runs share (EGRESS_CLIENT_BUILD_CACHE, see .bazelrc) or, without
// one, the test's own.
std::string GoEnv(const std::string& gopath, const std::string& dir) {
  return absl::StrCat("GO111MODULE=off GOPATH=", gopath,
                      ":/usr/share/gocode GOPROXY=off GOFLAGS= GOENV=off GOTOOLCHAIN=local ",
                      "CGO_ENABLED=0 GOCACHE=\"${EGRESS_CLIENT_BUILD_CACHE:-", dir,
                      "}/go-build\" HOME=", dir, " ");
}

TEST_F(ClientsTest, GoClientFetchesReusesAndMapsErrors) {
  int status = -1;
  const std::string gopath = dir_ + "/gopath";
  const std::string generated =
      RunShell(absl::StrCat(Runfile("client/go/generate.sh"), " ", gopath, " 2>&1"), &status);
  ASSERT_EQ(status, 0) << generated;
  const std::string go = GoEnv(gopath, dir_) + "go ";
  const std::string output = RunShell(
      absl::StrCat("cd ", gopath, " && ", go, "run ", Runfile("tests/e2e/check_go.go"), " ",
                   Target(), " ", Url(), " ", LargeUrl(), " '", kDeniedUrl, "'"),
      &status);
  ASSERT_EQ(status, 0) << output;
  ExpectFetchesAndErrors(JsonLines(output));

  // client/go's own tests, the live ones against this egressd.
  const std::string tests = RunShell(
      absl::StrCat("cd ", gopath, " && EGRESS_TARGET=", Target(), " EGRESS_TEST_URL=", Url(),
                   " EGRESS_TEST_DENIED_URL='", kDeniedUrl, "' ", go, "test -v egress.internal/client/egress 2>&1"),
      &status);
  EXPECT_EQ(status, 0) << tests;
  EXPECT_EQ(tests.find("--- SKIP"), std::string::npos) << tests;
  EXPECT_NE(tests.find("--- PASS: TestLiveAStreamClosedEarlyLeavesAReusableConnection"),
            std::string::npos) << tests;

  // The README's example, as printed there.
  const std::string example = RunShell(
      absl::StrCat("cd ", gopath, " && ", go, "run egress.internal/client/example ", Url(), " ", Target(), " 2>&1"),
      &status);
  EXPECT_EQ(status, 0) << example;
  EXPECT_NE(example.find("fetch 2: HTTP 200, 4096 bytes"), std::string::npos) << example;
  EXPECT_NE(example.find("reused true"), std::string::npos) << example;
  EXPECT_NE(example.find("stream: HTTP 200, first 16 bytes"), std::string::npos) << example;
}

TEST_F(ClientsTest, JavaClientFetchesReusesAndMapsErrors) {
  int status = -1;
  const std::string build = dir_ + "/java";
  const std::string built = RunShell(
      absl::StrCat(Runfile("tests/e2e/java_client_build.sh"), " ", build, " 2>&1"), &status);
  ASSERT_EQ(status, 0) << built;
  const std::string java = absl::StrCat("java -cp \"$(cat ", build, "/classpath)\" ");
  const std::string output =
      RunShell(absl::StrCat(java, Runfile("tests/e2e/CheckJava.java"), " ", Target(), " ", Url(),
                            " ", LargeUrl(), " '", kDeniedUrl, "'"),
               &status);
  ASSERT_EQ(status, 0) << output;
  ExpectFetchesAndErrors(JsonLines(output));

  // client/java's own tests, the live ones against this egressd.
  const std::string tests = RunShell(
      absl::StrCat("EGRESS_TARGET=", Target(), " EGRESS_TEST_URL=", Url(),
                   " EGRESS_TEST_DENIED_URL='", kDeniedUrl, "' ", java,
                   "egress.client.EgressClientTest 2>&1"),
      &status);
  EXPECT_EQ(status, 0) << tests;
  EXPECT_EQ(tests.find("SKIP "), std::string::npos) << tests;
  EXPECT_NE(tests.find("PASS testLiveAStreamClosedEarlyLeavesAReusableConnection\n"),
            std::string::npos) << tests;

  // The README's example, as printed there.
  const std::string example =
      RunShell(absl::StrCat(java, "Example ", Url(), " ", Target(), " 2>&1"), &status);
  EXPECT_EQ(status, 0) << example;
  EXPECT_NE(example.find("fetch 2: HTTP 200, 4096 bytes"), std::string::npos) << example;
  EXPECT_NE(example.find("reused true"), std::string::npos) << example;
  EXPECT_NE(example.find("stream: HTTP 200, first 16 bytes"), std::string::npos) << example;
}

// "attachment; filename=\"caf\xE9.txt\"" as nginx sends it (an ISO-8859-1 byte), and as
// a client's header() gives it: the same characters in UTF-8 (é is C3 A9).
constexpr char kLatin1Disposition[] =
    "6174746163686d656e743b2066696c656e616d653d22636166e92e74787422 "
    "6174746163686d656e743b2066696c656e616d653d22636166c3a92e74787422\n";

TEST_F(ClientsTest, PythonClientGetsAHeaderValueThatIsNotUtf8ByteForByte) {
  int status = -1;
  const std::string stubs = dir_ + "/python-stubs-latin1";
  RunShell(absl::StrCat(Runfile("client/python/generate.sh"), " ", stubs), &status);
  ASSERT_EQ(status, 0);
  const std::string output = RunShell(
      absl::StrCat("/usr/bin/python3 ", Runfile("tests/e2e/check_header_bytes.py"), " ", stubs,
                   " ", Runfile("client/python"), " ", Target(), " ",
                   nginx_->HttpsUrl("/latin1-header"), " content-disposition 2>&1"),
      &status);
  ASSERT_EQ(status, 0) << output;
  EXPECT_EQ(output, kLatin1Disposition);
}

TEST_F(ClientsTest, NodeClientGetsAHeaderValueThatIsNotUtf8ByteForByte) {
  const char* npm_dir = std::getenv("EGRESS_NPM_DIR");
  int status = -1;
  const std::string output = RunShell(
      absl::StrCat("NODE_PATH=", npm_dir ? npm_dir : "/opt/egress-npm", "/node_modules ",
                   "EGRESS_PROTO_ROOT=", Runfile("proto"), " node ",
                   Runfile("tests/e2e/check_header_bytes.js"), " ", Runfile("client/node"), " ",
                   Target(), " ", nginx_->HttpsUrl("/latin1-header"),
                   " content-disposition 2>&1"),
      &status);
  ASSERT_EQ(status, 0) << output;
  EXPECT_EQ(output, kLatin1Disposition);
}

}  // namespace
}  // namespace egress::testing
