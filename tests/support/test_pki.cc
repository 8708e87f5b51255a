#include "tests/support/test_pki.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "service/base/files.h"
#include "tests/support/child_process.h"

namespace egress::testing {
namespace {

// A PEM file the test made (service/base/files.h wants a bound).
std::string Read(const std::string& path) { return ReadBoundedFile(path, 1 << 20).value_or(""); }

}  // namespace

Pki::Pki(const std::string& dir) : dir_(dir) {
  std::string script = absl::StrCat(
      "set -e; mkdir -p ", dir, " && cd ", dir,
      " && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
      " -keyout ca.key -out ca.pem -days 2 -subj /CN=access-test-ca 2>/dev/null");
  for (const auto& [name, san] :
       {std::pair<const char*, const char*>{"server", "DNS:localhost,URI:spiffe://test/egressd"},
        {"admin", "URI:spiffe://test/admin"},
        {"intruder", "URI:spiffe://test/intruder"},
        {"checkout", "DNS:checkout.test,URI:spiffe://test/checkout"},
        // An IP SAN of 5 bytes (GeneralNames, DER): names gRPC's C-core cannot read.
        {"unreadable", "DER:30078705010203040A"}}) {
    absl::StrAppend(
        &script, " && openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ",
        name, ".key -out ", name, ".csr -subj /CN=", name, "-cn 2>/dev/null && printf '",
        "subjectAltName=", san, "\\nextendedKeyUsage=serverAuth,clientAuth\\n' > ", name,
        ".ext && openssl x509 -req -in ", name, ".csr -CA ca.pem -CAkey ca.key -CAcreateserial",
        " -out ", name, ".pem -days 2 -extfile ", name, ".ext 2>/dev/null");
  }
  int status = -1;
  RunShell(script, &status);
  EXPECT_EQ(status, 0) << script;
}

std::shared_ptr<grpc::ChannelCredentials> Pki::Client(const std::string& name) const {
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = Read(File("ca.pem"));
  if (!name.empty()) {
    options.pem_cert_chain = Read(File(name + ".pem"));
    options.pem_private_key = Read(File(name + ".key"));
  }
  return grpc::SslCredentials(options);
}

}  // namespace egress::testing
