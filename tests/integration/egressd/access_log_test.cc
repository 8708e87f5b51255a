// The access log of the egressd binary: one JSON line per fetch and per denial, with
// what the caller and the upstream saw; off the request path, so that a sink nobody
// reads drops lines (counted) instead of stopping fetches.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "egress/v1/egress.grpc.pb.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "service/base/files.h"
#include "tests/support/child_process.h"
#include "tests/support/egressd_process.h"
#include "tests/support/fault_server.h"
#include "tests/support/http_get.h"
#include "tests/support/nginx_upstream.h"
#include "tests/support/wait_for.h"

namespace egress::testing {
namespace {

// Logs and outputs the test reads back (service/base/files.h wants a bound).
constexpr size_t kMaxTestFileBytes = 256 << 20;

using egress::v1::FetchRequest;
using egress::v1::FetchResponse;
using google::protobuf::Struct;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kCallerTrace[] = "4bf92f3577b34da6a3ce929d0e0e4736";
constexpr char kCallerSpan[] = "00f067aa0ba902b7";

std::string TestDir(const std::string& name) {
  const std::string dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
  mkdir(dir.c_str(), 0755);
  return dir;
}

// Makes a FIFO at `path` and opens it for reading (the descriptor, or -1), so that a
// writer can open it; nobody reads it.
int OpenUnreadFifo(const std::string& path) {
  if (mkfifo(path.c_str(), 0600) != 0) return -1;
  return open(path.c_str(), O_RDONLY | O_NONBLOCK);
}

// Each line of the access log, parsed by a JSON parser that knows nothing of the schema.
std::vector<Struct> ParseLines(const std::string& text) {
  std::vector<Struct> lines;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    Struct parsed;
    EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(std::string(line), &parsed).ok())
        << line;
    lines.push_back(parsed);
  }
  return lines;
}

std::string Text(const Struct& line, const std::string& field) {
  const auto it = line.fields().find(field);
  return it == line.fields().end() ? "<missing>" : it->second.string_value();
}
double Number(const Struct& line, const std::string& field) {
  const auto it = line.fields().find(field);
  if (it == line.fields().end()) return -1;
  // 64-bit numbers are JSON strings in protobuf's mapping.
  if (!it->second.has_string_value()) return it->second.number_value();
  double value = -1;
  return absl::SimpleAtod(it->second.string_value(), &value) ? value : -1;
}

// A counter's value in /metrics text, or -1 when absent.
double Counter(const std::string& metrics, const std::string& series) {
  for (absl::string_view line : absl::StrSplit(metrics, '\n')) {
    if (absl::ConsumePrefix(&line, series + " ")) {
      double value = -1;
      return absl::SimpleAtod(line, &value) ? value : -1;
    }
  }
  return -1;
}

class AccessLogTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { nginx_ = NginxUpstream::Start(TestDir("nginx")).release(); }
  static void TearDownTestSuite() { delete nginx_; }

  // egressd with `config` (text format, after a policy that allows 127.0.0.1 and denies
  // 127.0.0.2, with `policy` inside it) and --access_log=`sink`, run as `binary`.
  void Start(const std::string& name, const std::string& config, const std::string& sink,
             const std::string& policy = "", const std::string& binary = "") {
    const std::string dir = TestDir(name);
    std::ofstream(dir + "/egress.textproto")
        << "policy { allow_cidrs: \"127.0.0.1/32\" deny_cidrs: \"127.0.0.2/32\" " << policy
        << " }\n"
        << config;
    log_ = dir + "/egressd.log";
    egressd_ = std::make_unique<EgressdProcess>(
        binary.empty() ? Runfile("service/egressd") : binary, dir + "/egress.textproto", log_,
        std::vector<std::string>{"--access_log=" + sink, "--config_poll=1h"});
    ASSERT_TRUE(egressd_->WaitUntilListening()) << ReadBoundedFile(log_, kMaxTestFileBytes).value_or("");
    stub_ = egress::v1::Egress::NewStub(
        grpc::CreateChannel(egressd_->grpc_target(), grpc::InsecureChannelCredentials()));
  }

  grpc::Status Fetch(const FetchRequest& request, FetchResponse* response,
                     const std::string& traceparent = "") {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    if (!traceparent.empty()) {
      context.AddMetadata("traceparent", traceparent);
      context.AddMetadata("tracestate", "vendor=abc");
    }
    return stub_->Fetch(&context, request, response);
  }
  static FetchRequest Request(const std::string& url) {
    FetchRequest request;
    request.set_url(url);
    return request;
  }

  // The log's lines once there are `count` of them (within 10 s).
  static std::vector<Struct> WaitForLines(const std::string& path, size_t count) {
    std::vector<Struct> lines;
    WaitFor(
        [&] {
          lines = ParseLines(ReadBoundedFile(path, kMaxTestFileBytes).value_or(""));
          return lines.size() >= count;
        },
        absl::Seconds(10));
    return lines;
  }

  std::string Metrics() {
    auto reply = HttpGet(egressd_->metrics_port(), "/metrics");
    return reply.ok() ? reply->body : "";
  }

  static NginxUpstream* nginx_;
  std::string log_;
  std::unique_ptr<EgressdProcess> egressd_;
  std::unique_ptr<egress::v1::Egress::Stub> stub_;
};

NginxUpstream* AccessLogTest::nginx_ = nullptr;

TEST_F(AccessLogTest, EveryFetchAndDenialGivesOneLineWithEveryFieldAsTheCallerAndUpstreamSawIt) {
  const std::string path = TestDir("every-field") + "/access.log";
  Start("every-field", "", path);
  const std::string traceparent = absl::StrCat("00-", kCallerTrace, "-", kCallerSpan, "-01");

  FetchResponse fetched;
  const std::string url = nginx_->HttpUrl("/cl/1k?token=secret");
  FetchRequest request = Request(absl::StrCat("http://user:hunter2@", url.substr(7)));
  request.set_method("POST");
  request.set_body("12345");
  ASSERT_TRUE(Fetch(request, &fetched, traceparent).ok());
  FetchResponse headers_only;
  FetchRequest head = Request(nginx_->HttpUrl("/cl/100k"));
  head.set_body_mode(egress::v1::BODY_MODE_NONE);
  ASSERT_TRUE(Fetch(head, &headers_only).ok());
  FetchResponse denied_response;
  const grpc::Status denied = Fetch(
      Request(absl::StrCat("http://127.0.0.2:", nginx_->http_port(), "/cl/1k")), &denied_response);
  ASSERT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  FetchResponse invalid_response;
  ASSERT_EQ(Fetch(Request("not a url"), &invalid_response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  const std::vector<Struct> lines = WaitForLines(path, 4);
  ASSERT_EQ(lines.size(), 4u);
  // Every field of the schema is there on every line.
  const auto* schema = egress::v1::AccessLogEntry::descriptor();
  for (const Struct& line : lines) {
    for (int i = 0; i < schema->field_count(); ++i) {
      EXPECT_EQ(line.fields().count(schema->field(i)->name()), 1u) << schema->field(i)->name();
    }
  }
  // The lines come in the order the fetches ended (one after the other here), but a
  // drain's line waits for its drain: look each up by URL.
  const auto line_for = [&](const std::string& url_part) -> const Struct& {
    for (const Struct& line : lines) {
      if (absl::StrContains(Text(line, "url"), url_part)) return line;
    }
    ADD_FAILURE() << "no line for " << url_part;
    return lines.front();
  };

  const Struct& first = line_for("/cl/1k?");
  EXPECT_EQ(Text(first, "rpc"), "Fetch");
  EXPECT_EQ(Text(first, "method"), "POST");
  EXPECT_EQ(Text(first, "url"),
            absl::StrCat("http://REDACTED@", nginx_->HttpUrl("/cl/1k?REDACTED").substr(7)));
  EXPECT_THAT(Text(first, "url"), Not(HasSubstr("secret")));
  EXPECT_THAT(Text(first, "url"), Not(HasSubstr("hunter2")));
  EXPECT_EQ(Text(first, "origin"), absl::StrCat("http://127.0.0.1:", nginx_->http_port()));
  EXPECT_EQ(Text(first, "remote_address"), fetched.connection().remote_address());
  EXPECT_EQ(Number(first, "status_code"), fetched.status_code());
  EXPECT_EQ(Text(first, "grpc_code"), "OK");
  EXPECT_EQ(Number(first, "bytes_sent"), 5);
  EXPECT_EQ(Number(first, "bytes_received"), fetched.body().size());
  EXPECT_EQ(Number(first, "connection_id"), fetched.connection().connection_id());
  EXPECT_EQ(Text(first, "drain"), "pooled");
  EXPECT_EQ(Text(first, "policy_decision"), "allow");
  EXPECT_EQ(Text(first, "policy_rule"), "allow_cidrs:127.0.0.1/32");
  EXPECT_EQ(Text(first, "trace_id"), kCallerTrace);
  EXPECT_EQ(Text(first, "trace_id"), fetched.trace_id());
  EXPECT_EQ(Text(first, "span_id"), fetched.span_id());
  EXPECT_EQ(Text(first, "parent_span_id"), kCallerSpan);
  EXPECT_THAT(Text(first, "peer"), HasSubstr("127.0.0.1"));
  EXPECT_THAT(Text(first, "time"), HasSubstr("Z"));  // RFC 3339, UTC
  ASSERT_TRUE(first.fields().at("timing").has_struct_value());
  EXPECT_EQ(first.fields().at("timing").struct_value().fields().count("total"), 1u);

  const Struct& drained = line_for("/cl/100k");
  EXPECT_EQ(Number(drained, "bytes_received"), 0);
  EXPECT_EQ(Text(drained, "drain"), "drained");
  EXPECT_EQ(Number(drained, "drained_bytes"), 100 * 1024);
  EXPECT_EQ(Text(drained, "trace_id"), headers_only.trace_id());  // a trace of its own
  EXPECT_NE(headers_only.trace_id(), kCallerTrace);
  EXPECT_EQ(Text(drained, "parent_span_id"), "");

  const Struct& denial = line_for("127.0.0.2");
  EXPECT_EQ(Text(denial, "grpc_code"), "PERMISSION_DENIED");
  EXPECT_EQ(Text(denial, "error_reason"), "POLICY_DENIED");
  EXPECT_EQ(Text(denial, "policy_decision"), "deny");
  EXPECT_EQ(Text(denial, "policy_rule"), "deny_cidrs:127.0.0.2/32");
  EXPECT_EQ(Text(denial, "remote_address"), "127.0.0.2");  // checked, not connected to
  EXPECT_EQ(Number(denial, "status_code"), 0);
  EXPECT_EQ(Text(denial, "drain"), "none");

  const Struct& invalid = line_for("not a url");
  EXPECT_EQ(Text(invalid, "grpc_code"), "INVALID_ARGUMENT");
  EXPECT_EQ(Text(invalid, "error_reason"), "INVALID_URL");
  EXPECT_EQ(Text(invalid, "policy_decision"), "none");

  EXPECT_EQ(Counter(Metrics(), "egress_access_log_lines_total"), 4);
}

TEST_F(AccessLogTest, TheUpstreamSeesTheCallersTraceWithEgressdsSpanAsTheParent) {
  Start("trace", "", "off");
  const std::string traceparent = absl::StrCat("00-", kCallerTrace, "-", kCallerSpan, "-01");
  FetchResponse response;
  ASSERT_TRUE(Fetch(Request(nginx_->HttpUrl("/trace")), &response, traceparent).ok());
  EXPECT_EQ(response.trace_id(), kCallerTrace);
  ASSERT_EQ(response.span_id().size(), 16u);
  EXPECT_NE(response.span_id(), kCallerSpan);
  EXPECT_EQ(response.body(),
            absl::StrCat("00-", kCallerTrace, "-", response.span_id(), "-01|vendor=abc\n"));

  // No trace from the caller: egressd starts one, and the upstream is told of it.
  FetchResponse untraced;
  ASSERT_TRUE(Fetch(Request(nginx_->HttpUrl("/trace")), &untraced).ok());
  ASSERT_EQ(untraced.trace_id().size(), 32u);
  EXPECT_NE(untraced.trace_id(), kCallerTrace);
  EXPECT_EQ(untraced.body(),
            absl::StrCat("00-", untraced.trace_id(), "-", untraced.span_id(), "-01|\n"));

  // A traceparent the caller put in the request's headers is the parent, and is not
  // sent on as it was.
  FetchRequest in_headers = Request(nginx_->HttpUrl("/trace"));
  auto* header = in_headers.add_headers();
  header->set_name("Traceparent");
  header->set_value(traceparent);
  FetchResponse from_headers;
  ASSERT_TRUE(Fetch(in_headers, &from_headers).ok());
  EXPECT_EQ(from_headers.trace_id(), kCallerTrace);
  EXPECT_EQ(from_headers.body(),
            absl::StrCat("00-", kCallerTrace, "-", from_headers.span_id(), "-01|\n"));
}

// The sink blocks once the pipe (a FIFO open for reading, never read) is full.
TEST_F(AccessLogTest, ABlockedSinkDropsCountedLinesWhileFetchesGoOn) {
  const std::string fifo = TestDir("blocked") + "/access.fifo";
  const int reader = OpenUnreadFifo(fifo);
  ASSERT_GE(reader, 0);
  Start("blocked", "access_log { queue_lines: 50 }\n", fifo);

  constexpr int kFetches = 600;
  for (int i = 0; i < kFetches; ++i) {
    FetchResponse response;
    ASSERT_TRUE(Fetch(Request(nginx_->HttpUrl("/cl/1k")), &response).ok()) << i;
  }
  const std::string metrics = Metrics();
  const double written = Counter(metrics, "egress_access_log_lines_total");
  const double dropped = Counter(metrics, "egress_access_log_dropped_total{reason=\"queue_full\"}");
  // The pipe holds 64 KiB (about a hundred lines); two queues' worth may wait.
  EXPECT_LT(written, 200);
  EXPECT_GT(dropped, kFetches - 200 - 2 * 50);

  // A blocked sink holds up the exit by a second at most.
  const auto stopping = std::chrono::steady_clock::now();
  ASSERT_EQ(egressd_->process().Signal(SIGTERM), 0);
  EXPECT_EQ(egressd_->process().Wait(), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - stopping, std::chrono::seconds(5));
  close(reader);
}

TEST_F(AccessLogTest, SamplingLeavesOutSuccessesOnlyAndTheRateCapDropsCountedLines) {
  const std::string path = TestDir("sampled") + "/access.log";
  Start("sampled", "access_log { sample_ratio { value: 0.5 } }\n", path);
  constexpr int kFetches = 200;
  for (int i = 0; i < kFetches; ++i) {
    FetchResponse response;
    ASSERT_TRUE(Fetch(Request(nginx_->HttpUrl("/cl/1k")), &response).ok());
  }
  for (int i = 0; i < 10; ++i) {
    FetchResponse response;
    ASSERT_FALSE(Fetch(Request("not a url"), &response).ok());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // six batches
  const std::vector<Struct> lines = ParseLines(ReadBoundedFile(path, kMaxTestFileBytes).value_or(""));
  int ok = 0, failed = 0;
  for (const Struct& line : lines) (Text(line, "grpc_code") == "OK" ? ok : failed)++;
  EXPECT_EQ(failed, 10);  // failures are all logged
  // Binomial(200, 0.5) falls outside [50, 150] with a chance of about 1e-12.
  EXPECT_GT(ok, 50);
  EXPECT_LT(ok, 150);
}

TEST_F(AccessLogTest, LinesOverTheRateCapAreDroppedAndCounted) {
  const std::string path = TestDir("capped") + "/access.log";
  Start("capped", "access_log { max_lines_per_second: 20 }\n", path);
  const auto start = std::chrono::steady_clock::now();
  constexpr int kFetches = 100;
  for (int i = 0; i < kFetches; ++i) {
    FetchResponse response;
    ASSERT_TRUE(Fetch(Request(nginx_->HttpUrl("/cl/1k")), &response).ok());
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const std::string metrics = Metrics();
  const double written = Counter(metrics, "egress_access_log_lines_total");
  const double capped = Counter(metrics, "egress_access_log_dropped_total{reason=\"rate_limited\"}");
  // One second's burst, then 20 per second.
  EXPECT_LE(written, 20 + 20 * seconds + 1);
  EXPECT_EQ(written + capped, kFetches);
  EXPECT_EQ(ParseLines(ReadBoundedFile(path, kMaxTestFileBytes).value_or("")).size(), written);
}

// A report-only rule that matched a fetch which then failed is still in its line.
TEST_F(AccessLogTest, AWouldDenyIsLoggedForAFetchThatFailedAfterIt) {
  const std::string path = TestDir("would-deny") + "/access.log";
  Start("would-deny", "", path, "report_only { deny_cidrs: \"127.0.0.1/32\" }");
  FetchResponse response;
  const ClosedPort closed;
  ASSERT_EQ(Fetch(Request(absl::StrCat("http://127.0.0.1:", closed.port(), "/")), &response)
                .error_code(),
            grpc::StatusCode::UNAVAILABLE);
  const std::vector<Struct> lines = WaitForLines(path, 1);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(Text(lines[0], "policy_decision"), "would_deny");
  EXPECT_EQ(Text(lines[0], "policy_rule"), "deny_cidrs:127.0.0.1/32");
  EXPECT_EQ(Text(lines[0], "error_reason"), "CONNECT_FAILED");
}

// A caller's megabyte is cut to a few KiB in its line and in its error message: the
// queue is bounded in lines, so every line is bounded too.
TEST_F(AccessLogTest, AHugeInvalidUrlMakesABoundedLineAndMessage) {
  const std::string path = TestDir("huge-url") + "/access.log";
  Start("huge-url", "", path);
  FetchResponse response;
  const grpc::Status status =
      Fetch(Request("http://" + std::string(1 << 20, 'a') + "/%zz"), &response);
  ASSERT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_LT(status.error_message().size(), 1024u);
  const std::vector<Struct> lines = WaitForLines(path, 1);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_LE(Text(lines[0], "url").size(), 4096u + 3);
  EXPECT_LE(Text(lines[0], "error_message").size(), 4096u);
}

// A caller's megabyte of method (a valid token) is refused before it is sent, and cut to
// a few KiB in its line and its message, as a URL is.
TEST_F(AccessLogTest, AHugeMethodIsRefusedWithABoundedLineAndMessage) {
  const std::string path = TestDir("huge-method") + "/access.log";
  Start("huge-method", "", path);
  FetchRequest request = Request(nginx_->HttpUrl("/cl/1k"));
  request.set_method(std::string(1 << 20, 'A'));
  FetchResponse response;
  const grpc::Status status = Fetch(request, &response);
  ASSERT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("is longer than the 64 bytes egress sends"));
  EXPECT_LT(status.error_message().size(), 1024u);
  const std::vector<Struct> lines = WaitForLines(path, 1);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(Text(lines[0], "method").size(), 4096u + 3);
  EXPECT_EQ(Text(lines[0], "error_reason"), "INVALID_METHOD");
}

// A URL that does not parse still has its credentials redacted, in the url field and
// in the error message that quotes it.
TEST_F(AccessLogTest, CredentialsInAUrlThatDoesNotParseAreNotLogged) {
  const std::string path = TestDir("bad-url-credentials") + "/access.log";
  Start("bad-url-credentials", "", path);
  FetchResponse response;
  const grpc::Status status =
      Fetch(Request("http://user:secret@h.test/%zz?token=secret"), &response);
  ASSERT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  const std::vector<Struct> lines = WaitForLines(path, 1);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(Text(lines[0], "url"), "http://REDACTED@h.test/%zz");
  EXPECT_THAT(Text(lines[0], "error_message"), HasSubstr("REDACTED"));
  EXPECT_THAT(Text(lines[0], "error_message"), Not(HasSubstr("secret")));
}

// A URL that does not parse because of a space, a '<' or a '"' is quoted in its error
// message; with access_log.log_query off, its query is in neither the url field nor the
// message. The caller's own message quotes the URL it sent, whole.
TEST_F(AccessLogTest, TheQueryOfAUrlWithASpaceOrAQuoteIsInNoLogLine) {
  const std::string path = TestDir("odd-url-secret") + "/access.log";
  Start("odd-url-secret", "", path);
  for (const char* odd : {" ", "<", "\"", "> \"<"}) {
    FetchResponse response;
    const grpc::Status status =
        Fetch(Request(nginx_->HttpUrl(absl::StrCat("/a", odd, "b?token=SECRET"))), &response);
    ASSERT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << odd;
    EXPECT_THAT(status.error_message(), HasSubstr("SECRET")) << odd;
  }
  const std::vector<Struct> lines = WaitForLines(path, 4);
  ASSERT_EQ(lines.size(), 4u);
  for (const Struct& line : lines) {
    EXPECT_EQ(Text(line, "error_reason"), "INVALID_URL");
    EXPECT_THAT(Text(line, "error_message"), HasSubstr("is not a valid absolute URL"));
    EXPECT_THAT(Text(line, "error_message"), Not(HasSubstr("SECRET")));
    EXPECT_THAT(Text(line, "url"), Not(HasSubstr("SECRET")));
  }
}

// A host shaped like an address that is none is refused quoting the URL: not its query.
TEST_F(AccessLogTest, TheQueryOfAUrlWhoseHostIsNoAddressIsInNoLogLine) {
  const std::string path = TestDir("no-address-secret") + "/access.log";
  Start("no-address-secret", "", path);
  FetchResponse response;
  const grpc::Status status = Fetch(Request("http://1.2.3.999/?token=SECRET"), &response);
  ASSERT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("neither an IP address nor a name"));
  const std::vector<Struct> lines = WaitForLines(path, 1);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(Text(lines[0], "error_message"), HasSubstr("neither an IP address nor a name"));
  EXPECT_THAT(Text(lines[0], "error_message"), Not(HasSubstr("SECRET")));
  EXPECT_THAT(Text(lines[0], "url"), Not(HasSubstr("SECRET")));
}

// An upstream's invalid Location is quoted in the caller's error message; the log's
// message has its query redacted, as the url field has the caller's.
TEST_F(AccessLogTest, TheQueryOfAnInvalidRedirectLocationIsInNoLogLine) {
  const std::string path = TestDir("location-secret") + "/access.log";
  Start("location-secret", "", path);
  FaultServer upstream;
  const std::vector<std::string> locations = {
      "/a b?token=SECRET", "http://h.test/a b?token=SECRET", "/a\"b?token=SECRET",
      "http://user:SECRET@h.test/%zz", "http://h.test:99999/?token=SECRET",
      "http://1.2.3.999/?token=SECRET"};
  for (const std::string& location : locations) {
    FetchRequest request = Request(upstream.RedirectUrl(location));
    request.set_follow_redirects(true);
    FetchResponse response;
    const grpc::Status status = Fetch(request, &response);
    EXPECT_NE(status.error_code(), grpc::StatusCode::OK) << location;
    EXPECT_THAT(status.error_message(), HasSubstr("SECRET")) << location;
  }
  const std::vector<Struct> lines = WaitForLines(path, locations.size());
  ASSERT_EQ(lines.size(), locations.size());
  for (const Struct& line : lines) {
    EXPECT_THAT(Text(line, "error_reason"), ::testing::AnyOf("INVALID_REDIRECT", "INVALID_URL"));
    EXPECT_NE(Text(line, "error_message"), "");
    EXPECT_THAT(Text(line, "error_message"), Not(HasSubstr("SECRET")));
    EXPECT_THAT(Text(line, "url"), Not(HasSubstr("SECRET")));
  }
}

// egressd's own messages go to standard error: a standard output nobody reads (the
// access log's) holds up neither the admin service, which logs every call, nor the exit.
TEST_F(AccessLogTest, AStandardOutputNobodyReadsStopsNeitherTheAdminServiceNorTheExit) {
  const std::string dir = TestDir("blocked-stdout");
  const std::string fifo = dir + "/stdout.fifo";
  const int reader = OpenUnreadFifo(fifo);
  ASSERT_GE(reader, 0);
  const std::string wrapper = dir + "/egressd-to-fifo";
  std::ofstream(wrapper) << "#!/bin/sh\nexec " << Runfile("service/egressd") << " \"$@\" > "
                         << fifo << "\n";
  chmod(wrapper.c_str(), 0755);
  Start("blocked-stdout", "access_log { queue_lines: 50 }\n", "-", "", wrapper);

  for (int i = 0; i < 600; ++i) {
    FetchResponse response;
    ASSERT_TRUE(Fetch(Request(nginx_->HttpUrl("/cl/1k")), &response).ok()) << i;
  }
  EXPECT_GT(Counter(Metrics(), "egress_access_log_dropped_total{reason=\"queue_full\"}"), 0);
  auto admin = egress::v1::TransportAdmin::NewStub(
      grpc::CreateChannel(egressd_->admin_target(), grpc::InsecureChannelCredentials()));
  for (int i = 0; i < 3; ++i) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    egress::v1::PoolStats stats;
    EXPECT_TRUE(admin->GetPoolStats(&context, egress::v1::GetPoolStatsRequest(), &stats).ok());
  }
  const auto stopping = std::chrono::steady_clock::now();
  ASSERT_EQ(egressd_->process().Signal(SIGTERM), 0);
  EXPECT_EQ(egressd_->process().Wait(), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - stopping, std::chrono::seconds(5));
  close(reader);
}

}  // namespace
}  // namespace egress::testing
