// The egressd binary as a user starts it: no flags, default ports, SIGTERM to stop.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "egress/v1/egress.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/support/child_process.h"
#include "tests/support/http_get.h"
#include "tests/support/nginx_upstream.h"

namespace egress::testing {
namespace {

using ::testing::HasSubstr;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(EgressdTest, WithNoFlagsServesOnTheDefaultPortsDeniesLoopbackAndStopsOnSigterm) {
  const std::string dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/egressd");
  auto nginx = NginxUpstream::Start(dir + "/nginx");
  const std::string binary =
      absl::StrCat(std::getenv("TEST_SRCDIR"), "/", std::getenv("TEST_WORKSPACE"), "/service/egressd");
  const std::string log = dir + "/egressd.log";

  const pid_t pid = fork();
  if (pid == 0) {
    if (!freopen(log.c_str(), "w", stdout)) _exit(126);
    execl(binary.c_str(), "egressd", static_cast<char*>(nullptr));
    _exit(127);
  }
  ASSERT_TRUE(WaitForPort(50051, 30)) << ReadFile(log);
  ASSERT_TRUE(WaitForPort(9464, 5));

  auto stub = egress::v1::Egress::NewStub(
      grpc::CreateChannel("127.0.0.1:50051", grpc::InsecureChannelCredentials()));
  // The default egress policy keeps callers out of loopback (where nginx is).
  egress::v1::FetchRequest request;
  request.set_url(nginx->HttpUrl("/cl/1k"));
  egress::v1::FetchResponse response;
  grpc::ClientContext context;
  const grpc::Status status = stub->Fetch(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(status.error_message(), HasSubstr("a loopback address, denied by default"));

  auto metrics = HttpGet(9464, "/metrics");
  ASSERT_TRUE(metrics.ok());
  EXPECT_THAT(metrics->body, HasSubstr("egress_fetches_total{code=\"PERMISSION_DENIED\"} 1"));
  EXPECT_THAT(metrics->body, HasSubstr("egress_policy_denied_total{reason=\"loopback\"} 1"));

  kill(pid, SIGTERM);
  int exit_status = 0;
  ASSERT_EQ(waitpid(pid, &exit_status, 0), pid);
  EXPECT_TRUE(WIFEXITED(exit_status));
  EXPECT_EQ(WEXITSTATUS(exit_status), 0);
  const std::string output = ReadFile(log);
  EXPECT_THAT(output, HasSubstr("serving Egress on 127.0.0.1:50051"));
  EXPECT_THAT(output, HasSubstr("drain { mode: DRAIN_MODE_FIXED max_bytes: 262144"));
}

TEST(EgressdTest, InvalidConfigFileStopsItWithTheFieldNamed) {
  const std::string dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/egressd-bad");
  ASSERT_EQ(std::system(("mkdir -p " + dir).c_str()), 0);
  std::ofstream(dir + "/bad.textproto") << "drain { max_duration { seconds: -1 } }\n";
  const std::string binary =
      absl::StrCat(std::getenv("TEST_SRCDIR"), "/", std::getenv("TEST_WORKSPACE"), "/service/egressd");
  const std::string command =
      absl::StrCat(binary, " --config=", dir, "/bad.textproto 2>&1");
  FILE* pipe = popen(command.c_str(), "r");
  char line[1024];
  std::string output;
  while (fgets(line, sizeof(line), pipe)) output += line;
  const int status = pclose(pipe);
  EXPECT_NE(WEXITSTATUS(status), 0);
  EXPECT_THAT(output, HasSubstr("drain.max_duration: must not be negative"));
}

}  // namespace
}  // namespace egress::testing
