#ifndef EGRESS_TESTS_SUPPORT_TEST_PKI_H_
#define EGRESS_TESTS_SUPPORT_TEST_PKI_H_

#include <memory>
#include <string>

#include "grpcpp/security/credentials.h"
#include "service/server/server_credentials.h"

namespace egress::testing {

// A CA, a server certificate for localhost (DNS:localhost, URI:spiffe://test/egressd)
// and client certificates with chosen names, made with the openssl CLI in `dir`:
//   admin     URI:spiffe://test/admin                       CN admin-cn
//   intruder  URI:spiffe://test/intruder                    CN intruder-cn
//   checkout  DNS:checkout.test, URI:spiffe://test/checkout  CN checkout-cn
class Pki {
 public:
  explicit Pki(const std::string& dir);
  std::string File(const std::string& name) const { return dir_ + "/" + name; }
  // The server's certificate and key, and the CA as the client CA (mTLS).
  ServerTlsFiles ServerFiles() const {
    return {File("server.pem"), File("server.key"), File("ca.pem")};
  }
  // A client that trusts the CA and shows certificate `name` ("": none).
  std::shared_ptr<grpc::ChannelCredentials> Client(const std::string& name) const;

 private:
  std::string dir_;
};

}  // namespace egress::testing

#endif  // EGRESS_TESTS_SUPPORT_TEST_PKI_H_
