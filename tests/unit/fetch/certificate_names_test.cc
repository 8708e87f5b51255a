// A client certificate's names as gRPC's C-core reads them, on the loops' TLS acceptor:
// the names the identity rules use, and the certificates C-core refuses because it
// cannot read their names (the handshake fails rather than name the caller "").
#include "service/fetch/certificate_names.h"

#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace egress::fetch {
namespace {

using Certificate = std::unique_ptr<X509, decltype(&X509_free)>;

// An unsigned certificate (names are all NamesOf reads) with common name `cn`, given as
// the raw bytes of an ASN.1 string of `cn_type`.
Certificate WithCommonName(const std::string& cn, int cn_type) {
  Certificate certificate(X509_new(), X509_free);
  X509_NAME_add_entry_by_NID(X509_get_subject_name(certificate.get()), NID_commonName, cn_type,
                             reinterpret_cast<const unsigned char*>(cn.data()),
                             static_cast<int>(cn.size()), -1, 0);
  EXPECT_EQ(X509_NAME_entry_count(X509_get_subject_name(certificate.get())), 1);
  return certificate;
}

struct San {
  int type;           // GEN_URI, GEN_DNS, GEN_EMAIL (an IA5String) or GEN_IPADD (bytes)
  std::string bytes;
};

// Gives `certificate` its one subjectAltName extension.
void SetSans(X509* certificate, const std::vector<San>& sans) {
  GENERAL_NAMES* names = sk_GENERAL_NAME_new_null();
  for (const San& san : sans) {
    ASN1_STRING* value =
        ASN1_STRING_type_new(san.type == GEN_IPADD ? V_ASN1_OCTET_STRING : V_ASN1_IA5STRING);
    ASN1_STRING_set(value, san.bytes.data(), static_cast<int>(san.bytes.size()));
    GENERAL_NAME* name = GENERAL_NAME_new();
    GENERAL_NAME_set0_value(name, san.type, value);
    sk_GENERAL_NAME_push(names, name);
  }
  ASSERT_EQ(X509_add1_ext_i2d(certificate, NID_subject_alt_name, names, 0, X509V3_ADD_DEFAULT), 1);
  GENERAL_NAMES_free(names);
}

TEST(CertificateNamesTest, TheNamesTheIdentityRulesReadInTheirOrder) {
  Certificate certificate = WithCommonName("checkout-cn", MBSTRING_UTF8);
  SetSans(certificate.get(), {{GEN_URI, "spiffe://test/checkout"},
                             {GEN_DNS, "checkout.test"},
                             {GEN_IPADD, std::string("\x7f\x00\x00\x01", 4)},
                             {GEN_EMAIL, "team@example.com"}});
  const auto names = NamesOf(certificate.get());
  ASSERT_TRUE(names.has_value());
  EXPECT_EQ(names->common_name, "checkout-cn");
  EXPECT_EQ(names->uri_sans, std::vector<std::string>{"spiffe://test/checkout"});
  EXPECT_EQ(names->dns_sans, std::vector<std::string>{"checkout.test"});
}

TEST(CertificateNamesTest, ACommonNameThatIsNotUtf8IsRefusedAsCCoreRefusesIt) {
  // A UTF8String whose bytes are not UTF-8: C-core fails the handshake on it.
  EXPECT_FALSE(NamesOf(WithCommonName("caller\xff", V_ASN1_UTF8STRING).get()).has_value());
  // A BMPString (UTF-16) is read as UTF-8.
  const auto names = NamesOf(WithCommonName(std::string("\0o\0k", 4), V_ASN1_BMPSTRING).get());
  ASSERT_TRUE(names.has_value());
  EXPECT_EQ(names->common_name, "ok");
}

TEST(CertificateNamesTest, AnIpSanOfNeitherFourNorSixteenBytesIsRefused) {
  for (const size_t bytes : {0u, 5u, 15u, 17u}) {
    Certificate certificate = WithCommonName("caller", MBSTRING_UTF8);
    SetSans(certificate.get(),
            {{GEN_URI, "spiffe://test/caller"}, {GEN_IPADD, std::string(bytes, '\x01')}});
    EXPECT_FALSE(NamesOf(certificate.get()).has_value()) << bytes << " bytes";
  }
  Certificate v6 = WithCommonName("caller", MBSTRING_UTF8);
  SetSans(v6.get(), {{GEN_IPADD, std::string(16, '\x01')}});
  EXPECT_TRUE(NamesOf(v6.get()).has_value());
}

TEST(CertificateNamesTest, NoCertificateHasNoNames) {
  const auto names = NamesOf(static_cast<const X509*>(nullptr));
  ASSERT_TRUE(names.has_value());
  EXPECT_TRUE(names->uri_sans.empty() && names->dns_sans.empty() && names->common_name.empty());
}

}  // namespace
}  // namespace egress::fetch
