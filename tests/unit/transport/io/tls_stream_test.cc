// TlsStream with one read and one write in flight at once, as an HTTP/2 session runs it:
// records OpenSSL makes inside the read (a TLS 1.3 KeyUpdate's answer) while the write's
// records are on their way must go out after them, whole, and only once.
#include "service/transport/io/tls_stream.h"

#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "boost/asio/connect.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ssl/context.hpp"
#include "boost/asio/write.hpp"
#include "gtest/gtest.h"

namespace egress::transport {
namespace {

namespace net = boost::asio;

// The byte at `offset` of what the client writes: not periodic at record sizes, so that
// a record sent twice or out of order is seen.
char PayloadByte(size_t offset) { return static_cast<char>('a' + (offset * 7 + offset / 4093) % 26); }

// A TLS 1.3 server on loopback, one connection, blocking OpenSSL calls on a thread of
// its own, with a self-signed P-256 certificate made in memory.
class KeyUpdatingServer {
 public:
  // Accepts, then after `pause` (the client's write is stuck by then: nothing is read)
  // sends a KeyUpdate asking for one back, reads `expected` bytes checking each, and
  // answers "done".
  KeyUpdatingServer(size_t expected, std::chrono::milliseconds pause) {
    ctx_.reset(SSL_CTX_new(TLS_server_method()));
    SSL_CTX_set_min_proto_version(ctx_.get(), TLS1_3_VERSION);
    EVP_PKEY* key = EVP_EC_gen("P-256");
    X509* certificate = X509_new();
    ASN1_INTEGER_set(X509_get_serialNumber(certificate), 1);
    X509_gmtime_adj(X509_getm_notBefore(certificate), 0);
    X509_gmtime_adj(X509_getm_notAfter(certificate), 3600);
    X509_set_pubkey(certificate, key);
    X509_NAME_add_entry_by_txt(X509_get_subject_name(certificate), "CN", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>("localhost"), -1, -1, 0);
    X509_set_issuer_name(certificate, X509_get_subject_name(certificate));
    X509_sign(certificate, key, EVP_sha256());
    SSL_CTX_use_certificate(ctx_.get(), certificate);
    SSL_CTX_use_PrivateKey(ctx_.get(), key);
    X509_free(certificate);
    EVP_PKEY_free(key);

    listener_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof(address));
    listen(listener_, 1);
    socklen_t length = sizeof(address);
    getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this, expected, pause] { Serve(expected, pause); });
  }
  ~KeyUpdatingServer() {
    shutdown(listener_, SHUT_RDWR);
    thread_.join();
    close(listener_);
  }

  int port() const { return port_; }
  // Waits for the script's end: what went wrong, or nothing.
  std::string failure() { return failure_.get(); }

 private:
  void Serve(size_t expected, std::chrono::milliseconds pause) {
    const int fd = accept(listener_, nullptr, nullptr);
    if (fd < 0) return done_.set_value("accept failed");
    timeval timeout{10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
    SSL* ssl = SSL_new(ctx_.get());
    SSL_set_fd(ssl, fd);
    done_.set_value(Script(ssl, expected, pause));
    SSL_free(ssl);
    close(fd);
  }

  static std::string Script(SSL* ssl, size_t expected, std::chrono::milliseconds pause) {
    if (SSL_accept(ssl) != 1) return "handshake failed";
    std::this_thread::sleep_for(pause);
    if (SSL_key_update(ssl, SSL_KEY_UPDATE_REQUESTED) != 1 || SSL_do_handshake(ssl) != 1) {
      return "could not send a KeyUpdate";
    }
    char buffer[16384];
    size_t offset = 0;
    while (offset < expected) {
      size_t got = 0;
      if (SSL_read_ex(ssl, buffer, sizeof(buffer), &got) != 1) {
        return "reading failed at byte " + std::to_string(offset) + ": " +
               std::to_string(SSL_get_error(ssl, 0));
      }
      for (size_t i = 0; i < got; ++i, ++offset) {
        if (buffer[i] != PayloadByte(offset)) {
          return "byte " + std::to_string(offset) + " differs from what was written";
        }
      }
    }
    size_t written = 0;
    if (SSL_write_ex(ssl, "done", 4, &written) != 1) return "could not answer";
    return "";
  }

  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx_{nullptr, &SSL_CTX_free};
  int listener_ = -1;
  int port_ = 0;
  std::promise<std::string> done_;
  std::future<std::string> failure_ = done_.get_future();
  std::thread thread_;
};

TEST(TlsStreamTest, RecordsMadeByAReadWhileAWriteIsOnItsWayGoOutAfterItOnce) {
  // More than loopback's socket buffers hold: the write is stuck when the KeyUpdate comes.
  constexpr size_t kBytes = 32 << 20;
  KeyUpdatingServer server(kBytes, std::chrono::milliseconds(300));

  net::io_context io;
  net::ssl::context context(net::ssl::context::tls_client);
  context.set_verify_mode(net::ssl::verify_none);  // this test is about the records' order
  TlsStream tls(io.get_executor(), context);
  tls.next_layer().socket().connect(
      net::ip::tcp::endpoint(net::ip::address_v4::loopback(), server.port()));
  std::optional<boost::beast::error_code> handshake;
  tls.async_handshake([&](boost::beast::error_code ec) { handshake = ec; });
  io.run_for(std::chrono::seconds(10));
  ASSERT_TRUE(handshake.has_value());
  ASSERT_FALSE(*handshake) << handshake->message();
  io.restart();

  std::string payload(kBytes, '\0');
  for (size_t i = 0; i < kBytes; ++i) payload[i] = PayloadByte(i);
  std::string answer(16, '\0');
  std::optional<boost::beast::error_code> read, write;
  size_t read_bytes = 0, written = 0;
  // The read is in flight first and stays so: it takes in the KeyUpdate and answers it.
  tls.async_read_some(net::buffer(answer), [&](boost::beast::error_code ec, size_t bytes) {
    read = ec;
    read_bytes = bytes;
  });
  net::async_write(tls, net::buffer(payload), [&](boost::beast::error_code ec, size_t bytes) {
    write = ec;
    written = bytes;
  });
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while ((!read || !write) && std::chrono::steady_clock::now() < give_up) {
    io.run_one_for(std::chrono::milliseconds(100));
  }

  EXPECT_EQ(server.failure(), "");
  ASSERT_TRUE(write.has_value());
  EXPECT_FALSE(*write) << write->message();
  EXPECT_EQ(written, kBytes);
  ASSERT_TRUE(read.has_value());
  EXPECT_FALSE(*read) << read->message();
  EXPECT_EQ(answer.substr(0, read_bytes), "done");
}

}  // namespace
}  // namespace egress::transport
