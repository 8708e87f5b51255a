// The transport's TLS files (transport.extra_ca_file, an origin's client_cert_file and
// client_key_file) read by egressd's bounded reader and handed to OpenSSL as bytes
// (issue 38): a bundle still loads every CA, a FIFO is refused at once naming the field.
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/transport/tls/client_context.h"

namespace egress::transport {
namespace {

using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  return absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
}

// A self-signed CA certificate (and its key) named `name`, made with the openssl CLI.
void MakeCertificate(const std::string& name) {
  const std::string command = absl::StrCat(
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ",
      TempPath(name + ".key"), " -out ", TempPath(name + ".pem"), " -days 2 -subj /CN=", name,
      " 2>/dev/null");
  ASSERT_EQ(std::system(command.c_str()), 0);
}

std::string Contents(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The certificates in the context's trust store (the system's file included).
int TrustedCertificates(SSL_CTX* context) {
  int count = 0;
  STACK_OF(X509_OBJECT)* objects = X509_STORE_get0_objects(SSL_CTX_get_cert_store(context));
  for (int i = 0; i < sk_X509_OBJECT_num(objects); ++i) {
    count += X509_OBJECT_get_type(sk_X509_OBJECT_value(objects, i)) == X509_LU_X509;
  }
  return count;
}

TEST(TlsFilesTest, AnExtraCaBundleOfThreeCasTrustsAllThree) {
  for (const char* name : {"ca-one", "ca-two", "ca-three"}) MakeCertificate(name);
  const std::string bundle = TempPath("bundle.pem");
  std::ofstream(bundle) << "# three CAs\n"
                        << Contents(TempPath("ca-one.pem")) << Contents(TempPath("ca-two.pem"))
                        << Contents(TempPath("ca-three.pem"));
  auto system_only = MakeClientTlsContext({"", "", ""});
  ASSERT_TRUE(system_only.ok()) << system_only.status();
  auto with_bundle = MakeClientTlsContext({bundle, "", ""});
  ASSERT_TRUE(with_bundle.ok()) << with_bundle.status();
  EXPECT_EQ(TrustedCertificates((*with_bundle)->native_handle()),
            TrustedCertificates((*system_only)->native_handle()) + 3);
}

TEST(TlsFilesTest, AClientCertificateAndKeyAreLoadedFromTheirFiles) {
  MakeCertificate("client");
  auto context =
      MakeClientTlsContext({"", TempPath("client.pem"), TempPath("client.key")});
  ASSERT_TRUE(context.ok()) << context.status();
  EXPECT_EQ(SSL_CTX_check_private_key((*context)->native_handle()), 1);
}

TEST(TlsFilesTest, AnExtraCaFileThatIsAFifoIsRefusedNamingTheField) {
  const std::string fifo = TempPath("ca-fifo");
  unlink(fifo.c_str());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  auto context = MakeClientTlsContext({fifo, "", ""});
  ASSERT_FALSE(context.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(context.status()));
  EXPECT_THAT(std::string(context.status().message()),
              HasSubstr(absl::StrCat("transport.extra_ca_file: \"", fifo,
                                     "\" is a FIFO, not a regular file")));
}

TEST(TlsFilesTest, AClientKeyFileThatIsAFifoIsRefusedNamingTheField) {
  MakeCertificate("client-fifo-key");
  const std::string fifo = TempPath("key-fifo");
  unlink(fifo.c_str());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  auto context = MakeClientTlsContext({"", TempPath("client-fifo-key.pem"), fifo});
  ASSERT_FALSE(context.ok());
  EXPECT_THAT(std::string(context.status().message()),
              HasSubstr("client_key_file: \"" + fifo + "\" is a FIFO, not a regular file"));
}

TEST(TlsFilesTest, AnExtraCaFileOverTheBoundIsRefused) {
  const std::string big = TempPath("big.pem");
  std::ofstream(big) << std::string(kMaxPemFileBytes + 1, '#');
  auto context = MakeClientTlsContext({big, "", ""});
  ASSERT_FALSE(context.ok());
  EXPECT_THAT(std::string(context.status().message()),
              HasSubstr(absl::StrCat("is larger than ", kMaxPemFileBytes, " bytes")));
}

}  // namespace
}  // namespace egress::transport
