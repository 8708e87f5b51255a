#ifndef EGRESS_TESTS_SUPPORT_NGINX_UPSTREAM_H_
#define EGRESS_TESTS_SUPPORT_NGINX_UPSTREAM_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/child_process.h"

namespace egress::testing {

// A real nginx (with the echo module) on loopback, over HTTP and HTTPS with a test CA,
// serving known content. Its access log tells which requests opened a new connection.
//
// Paths:
//   /cl/<name>          static files with Content-Length (see FileSizes())
//   /close/<name>       the same files with "Connection: close"
//   /chunked/1k         1024 bytes, chunked         /chunked/300k  307200 bytes, chunked
//   /chunked/mixed      chunks of 3, 1021 and 70001 bytes ("x", "y", "z")
//   /stall              1024 "a", an 80 ms pause, 1024 "b"; chunked
//   /slow-head          headers only after 3 s
//   /trace              the request's traceparent and tracestate, as "parent|state"
//   /echo               "ok\n" for any method
//   /upload             reads a request body of up to 64 MiB, answers its Content-Length
//   /redirect-internal  302 to http://127.0.0.1:<port>/cl/1k
//   /redirect-relative  302 to /cl/1k          /redirect-loop   302 to itself
//   /latin1-header      "ok\n" with Content-Disposition: attachment; filename="caf\xE9.txt"
//                       (an ISO-8859-1 byte: not UTF-8)
// HTTP also listens on 127.0.0.2 (redirector.test in the tests' /etc/hosts).
// On idle_close_port (https) the same paths, with idle connections closed after 1 s.
class NginxUpstream {
 public:
  struct LogEntry {
    uint64_t connection = 0;
    int connection_requests = 0;  // 1 = the first request on a new connection
    std::string method;
    std::string uri;
  };

  // Writes the PKI, the content and the config under dir, and starts nginx.
  static std::unique_ptr<NginxUpstream> Start(const std::string& dir);
  ~NginxUpstream();

  int http_port() const { return http_port_; }
  int https_port() const { return https_port_; }
  int idle_close_port() const { return idle_close_port_; }
  // HTTPS that requires a client certificate from the test CA.
  int mtls_port() const { return mtls_port_; }
  // HTTPS with only TLS 1.2, or only TLS 1.3, logged to a log of their own (TlsRequests).
  int tls12_port() const { return tls12_port_; }
  int tls13_port() const { return tls13_port_; }

  // A request on tls12_port or tls13_port, as its log has it.
  struct TlsLogEntry {
    int port = 0;
    std::string protocol;         // "TLSv1.2", "TLSv1.3"
    bool session_reused = false;  // the handshake resumed a session
    int connection_requests = 0;
    std::string uri;
  };
  // Entries for `uri` on tls12_port or tls13_port, waiting (up to 10 s) for `expected`.
  std::vector<TlsLogEntry> TlsRequests(const std::string& uri, size_t expected) const;
  // HTTPS offering HTTP/2 through ALPN (and HTTP/1.1), logged to a log of its own
  // (Http2Requests).
  int http2_port() const { return http2_port_; }
  struct Http2LogEntry {
    uint64_t connection = 0;
    int connection_requests = 0;
    std::string protocol;  // "HTTP/2.0", "HTTP/1.1"
    std::string method;
    std::string uri;
  };
  // Entries for `uri` on http2_port, h2c_port and http2_goaway_port, waiting (up to 10 s)
  // for `expected`.
  std::vector<Http2LogEntry> Http2Requests(const std::string& uri, size_t expected) const;
  // HTTP/2 over cleartext, with prior knowledge only (no upgrade, no HTTP/1.1).
  int h2c_port() const { return h2c_port_; }
  // As http2_port, but each connection carries 10 requests, then nginx sends GOAWAY.
  int http2_goaway_port() const { return http2_goaway_port_; }
  // HTTP that announces `Keep-Alive: timeout=2`, closes connections idle for 2 s and
  // after 3 requests (the 3rd response says "Connection: close").
  int keepalive_hint_port() const { return keepalive_hint_port_; }
  const std::string& ca_file() const { return ca_file_; }
  std::string client_cert_file() const { return dir_ + "/pki/client.pem"; }  // CN=egress-client
  std::string server_cert_file() const { return dir_ + "/pki/server.pem"; }  // localhost
  std::string server_key_file() const { return dir_ + "/pki/server.key"; }
  std::string client_key_file() const { return dir_ + "/pki/client.key"; }

  std::string HttpUrl(const std::string& path) const;
  std::string HttpsUrl(const std::string& path) const;
  std::string Http2Url(const std::string& path) const;
  std::string H2cUrl(const std::string& path) const;
  std::string Http2GoawayUrl(const std::string& path) const;
  // The bytes nginx serves for /cl/<name>.
  static std::string FileContent(const std::string& name);
  static std::vector<std::pair<std::string, size_t>> FileSizes();

  // Access-log entries whose request URI (path and query) is `uri`, waiting (up to 10 s) until there are `expected`.
  std::vector<LogEntry> WaitForRequests(const std::string& uri, size_t expected) const;
  // How many of `expected` requests for `uri` came on a new connection.
  int NewConnections(const std::string& uri, size_t expected) const;

 private:
  NginxUpstream() = default;
  // The lines of logs/<log> with `fields` fields, the last `uri`, split into fields;
  // waiting (up to 10 s) until there are `expected`.
  std::vector<std::vector<std::string>> WaitForLogLines(const std::string& log, size_t fields,
                                                        const std::string& uri,
                                                        size_t expected) const;

  std::string dir_;
  std::string ca_file_;
  std::unique_ptr<ChildProcess> process_;
  int http_port_ = 0;
  int https_port_ = 0;
  int idle_close_port_ = 0;
  int mtls_port_ = 0;
  int tls12_port_ = 0;
  int tls13_port_ = 0;
  int keepalive_hint_port_ = 0;
  int http2_port_ = 0;
  int h2c_port_ = 0;
  int http2_goaway_port_ = 0;
};

}  // namespace egress::testing

#endif  // EGRESS_TESTS_SUPPORT_NGINX_UPSTREAM_H_
