// Issue 40: each client installs the way its ecosystem installs things. For each language,
// tests/e2e/try_client_package.sh does what docs/clients.md shows, as a new user would:
// installs the package from a copy of the repository with that ecosystem's tool, offline,
// into a fresh project that then has nothing of the repository but the package, and runs
// the documented fetch against a live egressd whose policy denies the URL. The program
// must print the denial's google.rpc.ErrorInfo reason.
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/support/child_process.h"
#include "tests/support/egressd_process.h"

namespace egress::testing {
namespace {

// A loopback address outside the policy's allow_cidrs (127.0.0.0/8): egressd denies it
// before any connection, with the reason POLICY_DENIED and the rule that decided.
constexpr char kDeniedUrl[] = "http://[::1]:1/";

std::string FileText(const std::string& path) {
  std::ifstream file(path);
  return std::string(std::istreambuf_iterator<char>(file), {});
}

class PackagesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const char* tmp = std::getenv("TEST_TMPDIR");
    dir_ = absl::StrCat(tmp ? tmp : "/tmp", "/packages-test-", getpid());
    ASSERT_EQ(std::system(absl::StrCat("mkdir -p ", dir_).c_str()), 0);
    std::ofstream(dir_ + "/egress.textproto") << "policy { allow_cidrs: \"127.0.0.0/8\" }\n";
    egressd_ = std::make_unique<EgressdProcess>(
        Runfile("service/egressd"), dir_ + "/egress.textproto", dir_ + "/egressd.log");
    ASSERT_TRUE(egressd_->WaitUntilListening());
  }
  static void TearDownTestSuite() { egressd_.reset(); }

  // What the documented program(s) of `lang` printed on stdout; `status` is the
  // script's. Its stderr (the install's log when that failed) goes to Stderr(lang).
  static std::string TryPackage(const std::string& lang, int* status) {
    return RunShell(absl::StrCat(Runfile("tests/e2e/try_client_package.sh"), " ", lang, " ",
                                 egressd_->grpc_target(), " '", kDeniedUrl, "' ", dir_, "/",
                                 lang, " 2>", dir_, "/", lang, ".stderr"),
                    status);
  }
  static std::string Stderr(const std::string& lang) {
    return FileText(absl::StrCat(dir_, "/", lang, ".stderr"));
  }

  static inline std::string dir_;
  static inline std::unique_ptr<EgressdProcess> egressd_;
};

// Checks that `output` is `programs` lines "PERMISSION_DENIED POLICY_DENIED <rule>": the
// gRPC code, the ErrorInfo's reason and its metadata's rule, as each program printed them.
void ExpectDenials(const std::string& output, size_t programs) {
  const std::vector<std::string> lines = absl::StrSplit(output, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), programs) << output;
  for (const std::string& line : lines) {
    EXPECT_TRUE(absl::StartsWith(line, "PERMISSION_DENIED POLICY_DENIED ")) << output;
    EXPECT_GT(line.size(), strlen("PERMISSION_DENIED POLICY_DENIED ")) << output;  // the rule
  }
}

// One version for every client, client/VERSION's: Python's setup.py, Go's goproxy.py and
// the CMake package read it; npm's and Maven's manifests, and the commands
// docs/clients.md shows, spell it out, and must agree.
TEST_F(PackagesTest, EveryClientCarriesTheOneVersionOfClientVersion) {
  const std::string version(
      absl::StripAsciiWhitespace(FileText(Runfile("client/VERSION"))));
  ASSERT_FALSE(version.empty());
  EXPECT_TRUE(absl::StrContains(FileText(Runfile("client/node/package.json")),
                                absl::StrCat("\"version\": \"", version, "\"")));
  EXPECT_TRUE(absl::StrContains(
      FileText(Runfile("client/java/pom.xml")),
      absl::StrCat("<artifactId>egress-client</artifactId>\n  <version>", version, "</version>")));
  const std::string doc = FileText(Runfile("docs/clients.md"));
  EXPECT_TRUE(absl::StrContains(doc, absl::StrCat("./egress-client-", version, ".tgz")));
  EXPECT_TRUE(absl::StrContains(doc, absl::StrCat("egress.internal/client/egress@v", version)));
  EXPECT_TRUE(absl::StrContains(doc, absl::StrCat("<version>", version, "</version>")));
  const std::vector<std::string> major_minor = absl::StrSplit(version, '.');
  ASSERT_GE(major_minor.size(), 2u);
  EXPECT_TRUE(absl::StrContains(doc, absl::StrCat("find_package(egress_client ", major_minor[0],
                                                  ".", major_minor[1], " CONFIG")));
}

TEST_F(PackagesTest, PythonPackageInstallsWithPipAndItsSyncAndAsyncClientsShowTheDenialReason) {
  int status = -1;
  const std::string output = TryPackage("python", &status);
  ASSERT_EQ(status, 0) << output << Stderr("python");
  ExpectDenials(output, 2);
}

TEST_F(PackagesTest, NodePackagePacksWithNpmAndWorksFromTypeScriptAndJavaScript) {
  int status = -1;
  const std::string output = TryPackage("node", &status);
  ASSERT_EQ(status, 0) << output << Stderr("node");
  ExpectDenials(output, 2);  // build/fetch.js (tsc's from fetch.ts), then fetch.js
}

TEST_F(PackagesTest, GoModuleInstallsWithGoGetFromALocalProxyIntoAModuleModeMain) {
  int status = -1;
  const std::string output = TryPackage("go", &status);
  ASSERT_EQ(status, 0) << output << Stderr("go");
  ExpectDenials(output, 1);
}

TEST_F(PackagesTest, JavaArtifactInstallsWithMavenAndAMavenProjectUsesIt) {
  int status = -1;
  const std::string output = TryPackage("java", &status);
  ASSERT_EQ(status, 0) << output << Stderr("java");
  ExpectDenials(output, 1);
}

TEST_F(PackagesTest, CppLibraryInstallsWithCMakeAndACMakeProjectFindsIt) {
  int status = -1;
  const std::string output = TryPackage("cpp", &status);
  ASSERT_EQ(status, 0) << output << Stderr("cpp");
  ExpectDenials(output, 1);
}

}  // namespace
}  // namespace egress::testing
