#include "service/fetch/certificate_names.h"

#include <openssl/crypto.h>
#include <openssl/x509v3.h>

#include <memory>

#include "grpc/grpc_security_constants.h"

namespace egress::fetch {
namespace {

std::vector<std::string> Values(const grpc::AuthContext& auth, const char* property) {
  std::vector<std::string> values;
  for (const auto& value : auth.FindPropertyValues(property)) {
    values.emplace_back(value.data(), value.size());
  }
  return values;
}

// An ASN.1 string as UTF-8, as C-core converts SANs and the CN; none if it cannot be.
std::optional<std::string> Utf8(const ASN1_STRING* text) {
  unsigned char* utf8 = nullptr;
  const int size = ASN1_STRING_to_UTF8(&utf8, text);
  if (size < 0) return std::nullopt;
  std::string converted(reinterpret_cast<const char*>(utf8), static_cast<size_t>(size));
  OPENSSL_free(utf8);
  return converted;
}

}  // namespace

CertificateNames NamesOf(const grpc::AuthContext& auth) {
  if (!auth.IsPeerAuthenticated()) return {};
  CertificateNames names;
  names.uri_sans = Values(auth, GRPC_PEER_URI_PROPERTY_NAME);
  names.dns_sans = Values(auth, GRPC_PEER_DNS_PROPERTY_NAME);
  const auto common_names = Values(auth, GRPC_X509_CN_PROPERTY_NAME);
  if (!common_names.empty()) names.common_name = common_names.front();
  return names;
}

std::optional<CertificateNames> NamesOf(const X509* certificate) {
  CertificateNames names;
  if (!certificate) return names;
  const X509_NAME* subject = X509_get_subject_name(certificate);
  const int cn = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);
  if (cn >= 0) {
    auto common_name = Utf8(X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, cn)));
    if (!common_name) return std::nullopt;
    names.common_name = *std::move(common_name);
  }
  std::unique_ptr<GENERAL_NAMES, decltype(&GENERAL_NAMES_free)> sans(
      static_cast<GENERAL_NAMES*>(
          X509_get_ext_d2i(certificate, NID_subject_alt_name, nullptr, nullptr)),
      GENERAL_NAMES_free);
  for (int i = 0; sans && i < sk_GENERAL_NAME_num(sans.get()); ++i) {
    const GENERAL_NAME* san = sk_GENERAL_NAME_value(sans.get(), i);
    std::vector<std::string>* kept = nullptr;  // the SAN kinds the identity rules read
    const ASN1_STRING* text = nullptr;
    switch (san->type) {
      case GEN_URI: kept = &names.uri_sans; text = san->d.uniformResourceIdentifier; break;
      case GEN_DNS: kept = &names.dns_sans; text = san->d.dNSName; break;
      case GEN_EMAIL: text = san->d.rfc822Name; break;
      case GEN_IPADD: {
        const int length = ASN1_STRING_length(san->d.iPAddress);
        if (length != 4 && length != 16) return std::nullopt;
        continue;
      }
      default: continue;  // C-core takes any other kind as it is
    }
    auto name = Utf8(text);
    if (!name) return std::nullopt;
    if (kept) kept->push_back(*std::move(name));
  }
  return names;
}

std::string CertificateName(const CertificateNames& names, egress::v1::IdentitySource source) {
  switch (source) {
    case egress::v1::IDENTITY_SOURCE_DNS_SAN:
      return names.dns_sans.empty() ? "" : names.dns_sans.front();
    case egress::v1::IDENTITY_SOURCE_COMMON_NAME:
      return names.common_name;
    default:
      return names.uri_sans.empty() ? "" : names.uri_sans.front();
  }
}

}  // namespace egress::fetch
