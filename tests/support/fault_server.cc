#include "tests/support/fault_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <stdexcept>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace egress::testing {
namespace {

bool SendAll(int fd, const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

// Reads one request (head and Content-Length body) from `pending` and `recv` (as
// ::recv on the connection); returns its path, or "" when the connection ended first.
// `head_out`, when given, gets the request line and header lines.
template <class Recv>
std::string ReadRequestWith(Recv recv, std::string& pending, std::string* head_out = nullptr) {
  size_t head_end;
  while ((head_end = pending.find("\r\n\r\n")) == std::string::npos) {
    char buffer[4096];
    const ssize_t n = recv(buffer, sizeof(buffer));
    if (n <= 0) return "";
    pending.append(buffer, static_cast<size_t>(n));
  }
  const std::string head = pending.substr(0, head_end);
  if (head_out) *head_out = head;
  if (absl::StartsWith(head, "PUT /unread-body ")) {  // its body is left where it is
    pending.clear();
    return "/unread-body";
  }
  size_t body_bytes = 0;
  for (absl::string_view line : absl::StrSplit(head, "\r\n")) {
    if (absl::StartsWithIgnoreCase(line, "content-length:")) {
      (void)absl::SimpleAtoi(absl::StripAsciiWhitespace(line.substr(15)), &body_bytes);
    }
  }
  while (pending.size() < head_end + 4 + body_bytes) {
    char buffer[4096];
    const ssize_t n = recv(buffer, sizeof(buffer));
    if (n <= 0) return "";
    pending.append(buffer, static_cast<size_t>(n));
  }
  pending.erase(0, head_end + 4 + body_bytes);
  const std::vector<std::string> request_line = absl::StrSplit(head.substr(0, head.find("\r\n")), ' ');
  if (request_line.size() < 2) return "";
  const std::string target = request_line[1];
  return target.substr(0, target.find('?'));
}

std::string ReadRequest(int fd, std::string& pending, std::string* head_out = nullptr) {
  return ReadRequestWith(
      [fd](char* buffer, size_t size) { return ::recv(fd, buffer, size, 0); }, pending,
      head_out);
}

// /redirect-to's Location: the request target's query (in `head`, the request line and
// header lines), percent-decoded, without CR and LF.
std::string RedirectTarget(const std::string& head) {
  const std::string line = head.substr(0, head.find("\r\n"));
  const size_t query = line.find('?');
  const size_t end = line.rfind(' ');
  if (query == std::string::npos || end == std::string::npos || end < query) return "";
  std::string location;
  for (size_t i = query + 1; i < end; ++i) {
    int byte = static_cast<unsigned char>(line[i]);
    if (byte == '%' && i + 2 < end && absl::ascii_isxdigit(static_cast<unsigned char>(line[i + 1])) &&
        absl::ascii_isxdigit(static_cast<unsigned char>(line[i + 2]))) {
      (void)absl::SimpleHexAtoi(line.substr(i + 1, 2), &byte);
      i += 2;
    }
    if (byte != '\r' && byte != '\n') location.push_back(static_cast<char>(byte));
  }
  return location;
}

// Waits until the peer closes the connection, discarding what it sends.
void WaitForPeerClose(int fd) {
  char buffer[4096];
  while (::recv(fd, buffer, sizeof(buffer), 0) > 0) {
  }
}

// Closes with a TCP reset instead of a FIN.
void Reset(int fd) {
  linger hard{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &hard, sizeof(hard));
}

// Sends `bytes` one a second; false as soon as the peer goes away.
bool Trickle(int fd, const std::string& bytes, const std::atomic<bool>& stopping) {
  for (char byte : bytes) {
    if (stopping || !SendAll(fd, std::string(1, byte))) return false;
    pollfd hang_up{fd, POLLRDHUP, 0};
    if (::poll(&hang_up, 1, 1000) != 0) return false;
  }
  return true;
}

// Sends `prefix`, then `unit` over and over until the peer goes away (or 2 GiB).
void SendEndless(int fd, const std::string& prefix, const std::string& unit,
                 const std::atomic<bool>& stopping) {
  if (!SendAll(fd, prefix)) return;
  std::string block;
  while (block.size() < 64 * 1024) block += unit;
  for (size_t sent = 0; sent < (size_t{2} << 30) && !stopping; sent += block.size()) {
    if (!SendAll(fd, block)) return;
  }
}

const std::string kChunkedHead = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";

const std::string kOk = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

const std::string kEvil = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nEVIL!";

bool SslWriteAll(SSL* ssl, const std::string& bytes) {
  return SSL_write(ssl, bytes.data(), static_cast<int>(bytes.size())) ==
         static_cast<int>(bytes.size());
}

}  // namespace

FaultServer::FaultServer() { Listen(); }

void FaultServer::Listen() {
  for (Kind kind : {Kind::kHttp, Kind::kSilent, Kind::kGarbage}) {
    const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    if (listener < 0 || ::bind(listener, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
        ::listen(listener, 128) != 0 ||
        ::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      throw std::runtime_error("fault server: cannot listen on 127.0.0.1");
    }
    listeners_.push_back(listener);
    ports_.push_back(ntohs(address.sin_port));
    accept_threads_.emplace_back([this, listener, kind] { AcceptLoop(listener, kind); });
  }
}

FaultServer::FaultServer(const std::string& cert_file, const std::string& key_file) {
  ::signal(SIGPIPE, SIG_IGN);  // SSL_write to a peer that left
  tls_ = SSL_CTX_new(TLS_server_method());
  if (tls_ == nullptr ||
      SSL_CTX_use_certificate_chain_file(tls_, cert_file.c_str()) != 1 ||
      SSL_CTX_use_PrivateKey_file(tls_, key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    SSL_CTX_free(tls_);
    throw std::runtime_error("fault server: cannot load the TLS certificate and key");
  }
  // Delegating would start the threads before tls_ is set.
  Listen();
}

FaultServer::~FaultServer() {
  stopping_ = true;
  for (int listener : listeners_) ::shutdown(listener, SHUT_RDWR);
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int fd : open_) ::shutdown(fd, SHUT_RDWR);
  }
  for (auto& thread : accept_threads_) thread.join();
  {
    // Connection threads are detached (a soak makes hundreds of thousands); each one
    // leaves open_ as its last step.
    std::unique_lock<std::mutex> lock(mu_);
    all_closed_.wait(lock, [this] { return open_.empty(); });
  }
  for (int listener : listeners_) ::close(listener);
  SSL_CTX_free(tls_);
}

std::string FaultServer::Url(const std::string& path) const {
  return absl::StrCat(tls_ ? "https" : "http", "://127.0.0.1:", port(), path);
}

std::string FaultServer::RedirectUrl(absl::string_view location) const {
  std::string query;
  for (const char c : location) {
    if (absl::ascii_isalnum(static_cast<unsigned char>(c))) {
      query.push_back(c);
    } else {
      absl::StrAppend(&query, absl::StrFormat("%%%02X", static_cast<unsigned char>(c)));
    }
  }
  return Url(absl::StrCat("/redirect-to?", query));
}

int FaultServer::open_connections() {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(open_.size());
}

int FaultServer::unaccepted() const {
  int queued = 0;
  for (int listener : listeners_) {
    tcp_info info{};
    socklen_t size = sizeof(info);
    // On a listening socket Linux reports the accept queue's length as tcpi_unacked.
    if (::getsockopt(listener, IPPROTO_TCP, TCP_INFO, &info, &size) == 0) {
      queued += static_cast<int>(info.tcpi_unacked);
    }
  }
  return queued;
}

void FaultServer::AcceptLoop(int listener, Kind kind) {
  while (!stopping_) {
    const int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;
    ++accepted_;
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      ::close(fd);
      return;
    }
    open_.insert(fd);
    std::thread([this, fd, kind] { Serve(fd, kind); }).detach();
  }
}

void FaultServer::Serve(int fd, Kind kind) {
  switch (kind) {
    case Kind::kHttp: tls_ ? ServeTls(fd) : ServeHttp(fd); break;
    case Kind::kSilent: WaitForPeerClose(fd); break;
    case Kind::kGarbage:
      SendAll(fd, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
      WaitForPeerClose(fd);
      break;
  }
  Closed(fd);
}

void FaultServer::Closed(int fd) {
  std::lock_guard<std::mutex> lock(mu_);
  ::close(fd);
  open_.erase(fd);
  if (open_.empty()) all_closed_.notify_all();
}

void FaultServer::ServeHttp(int fd) {
  std::string pending;
  for (int served = 0;; ++served) {
    std::string head;
    const std::string path = ReadRequest(fd, pending, &head);
    if (path.empty()) return;
    if (path == "/close-on-reuse" && served > 0) return;  // read, never answered
    if (path == "/ok" || path == "/close-on-reuse") {
      if (!SendAll(fd, kOk)) return;
    } else if (path == "/chunked-ok") {
      if (!SendAll(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                       "2\r\nok\r\n0\r\n\r\n")) {
        return;
      }
    } else if (path == "/switch") {
      ++switch_requests_;
      switch (switch_.load()) {
        case Switch::kOk:
          if (!SendAll(fd, kOk)) return;
          break;
        case Switch::k503:
          if (!SendAll(fd, "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n")) {
            return;
          }
          break;
        case Switch::k503RetryAfter1:
          if (!SendAll(fd, "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\n"
                           "Content-Length: 0\r\n\r\n")) {
            return;
          }
          break;
        case Switch::kReset:
          return Reset(fd);
      }
    } else if (path == "/close-idle") {
      SendAll(fd, kOk);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      return;
    } else if (path == "/reset-headers") {
      SendAll(fd, "HTTP/1.1 200 OK\r\nContent-Le");
      return Reset(fd);
    } else if (path == "/reset-body") {
      SendAll(fd, absl::StrCat("HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n",
                               std::string(1000, 'x')));
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      return Reset(fd);
    } else if (path == "/bad-status") {
      SendAll(fd, "HTTX/1.1 2OO OK\r\nContent-Length: 2\r\n\r\nok");
      return WaitForPeerClose(fd);
    } else if (path == "/low-status") {
      SendAll(fd, "HTTP/1.1 050 Low\r\nContent-Length: 2\r\n\r\nok");
      return WaitForPeerClose(fd);
    } else if (path == "/bad-header") {
      SendAll(fd, "HTTP/1.1 200 OK\r\nThis is not a header\r\nContent-Length: 2\r\n\r\nok");
      return WaitForPeerClose(fd);
    } else if (path == "/huge-headers") {
      SendAll(fd, absl::StrCat("HTTP/1.1 200 OK\r\nX-Huge: ", std::string(100 * 1024, 'h'),
                               "\r\nContent-Length: 2\r\n\r\nok"));
      return WaitForPeerClose(fd);
    } else if (path == "/short-body") {
      SendAll(fd, absl::StrCat("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n",
                               std::string(10, 's')));
      return;
    } else if (path == "/close-delimited") {
      SendAll(fd, absl::StrCat("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n",
                               std::string(100000, 'c')));
      return;
    } else if (path == "/long-body") {
      if (!SendAll(fd, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello, and 15 more")) return;
    } else if (path == "/bad-chunk") {
      SendAll(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\nnot hex\r\n0\r\n\r\n");
      return WaitForPeerClose(fd);
    } else if (path == "/endless-chunk-ext") {
      SendEndless(fd, kChunkedHead + "5;ext=", "a", stopping_);
      return;
    } else if (path == "/endless-trailer-line") {
      SendEndless(fd, kChunkedHead + "5\r\nhello\r\n0\r\nX-Trailer: ", "t", stopping_);
      return;
    } else if (path == "/endless-trailer-lines") {
      SendEndless(fd, kChunkedHead + "5\r\nhello\r\n0\r\n", "X-T: t\r\n", stopping_);
      return;
    } else if (path == "/endless-interim") {
      SendEndless(fd, "", "HTTP/1.1 100 Continue\r\n\r\n", stopping_);
      return;
    } else if (path == "/endless-body") {
      if (!SendAll(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")) return;
      const std::string chunk = absl::StrCat("10000\r\n", std::string(0x10000, 'e'), "\r\n");
      while (!stopping_ && SendAll(fd, chunk)) {
      }
      return;
    } else if (path == "/stall-body") {
      if (!SendAll(fd, absl::StrCat("HTTP/1.1 200 OK\r\nContent-Length: 2097152\r\n\r\n",
                                    std::string(600 * 1024, 's')))) {
        return;
      }
      return WaitForPeerClose(fd);
    } else if (path == "/latin1-header") {
      if (!SendAll(fd, "HTTP/1.1 200 OK\r\nContent-Disposition: attachment; "
                       "filename=\"caf\xE9.txt\"\r\nContent-Length: 2\r\n\r\nok")) {
        return;
      }
    } else if (path == "/latin1-location") {
      if (!SendAll(fd, "HTTP/1.1 302 Found\r\nLocation: http://caf\xE9 .test/\r\n"
                       "Content-Length: 0\r\n\r\n")) {
        return;
      }
    } else if (path == "/redirect-other-origin" || path == "/redirect-same-origin") {
      // "localhost" is the same server under another host name: another origin.
      const std::string location = path == "/redirect-same-origin"
                                       ? "/echo-headers"
                                       : absl::StrCat("http://localhost:", port(), "/echo-headers");
      if (!SendAll(fd, absl::StrCat("HTTP/1.1 302 Found\r\nLocation: ", location,
                                    "\r\nContent-Length: 0\r\n\r\n"))) {
        return;
      }
    } else if (path == "/redirect-to") {
      // The Location is the target's query, percent-decoded; CR and LF are left out
      // (they would end the header), every other byte is sent as it is.
      if (!SendAll(fd, absl::StrCat("HTTP/1.1 302 Found\r\nLocation: ", RedirectTarget(head),
                                    "\r\nContent-Length: 0\r\n\r\n"))) {
        return;
      }
    } else if (path == "/wide-answer") {
      std::string head = "HTTP/1.1 200 OK\r\n";
      for (int i = 0; i < 200; ++i) {
        absl::StrAppend(&head, "X-Wide-", i, ": ", std::string(1000, '\xE9'), "\r\n");
      }
      constexpr size_t kBodyBytes = 3932160;
      absl::StrAppend(&head, "Content-Length: ", kBodyBytes, "\r\n\r\n");
      if (!SendAll(fd, head) || !SendAll(fd, std::string(kBodyBytes, 'w'))) return;
    } else if (path == "/echo-headers") {
      if (!SendAll(fd, absl::StrCat("HTTP/1.1 200 OK\r\nContent-Length: ", head.size(),
                                    "\r\n\r\n", head))) {
        return;
      }
    } else if (path == "/unread-body") {
      ++unread_body_requests_;
      return WaitForPeerClose(fd);
    } else if (path == "/never") {
      ++never_requests_;
      return WaitForPeerClose(fd);
    } else if (path == "/slow-head") {
      Trickle(fd, kOk, stopping_);
      return WaitForPeerClose(fd);
    } else if (path == "/slow-body") {
      if (!SendAll(fd, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n")) return;
      Trickle(fd, std::string(100, 'b'), stopping_);
      return WaitForPeerClose(fd);
    } else {
      if (!SendAll(fd, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")) return;
    }
  }
}

void FaultServer::ServeTls(int fd) {
  SSL* ssl = SSL_new(tls_);
  if (ssl == nullptr) return;
  SSL_set_fd(ssl, fd);
  std::string pending;
  const auto recv = [ssl](char* buffer, size_t size) -> ssize_t {
    return SSL_read(ssl, buffer, static_cast<int>(size));
  };
  while (SSL_is_init_finished(ssl) || SSL_accept(ssl) == 1) {
    const std::string path = ReadRequestWith(recv, pending);
    if (path.empty()) break;
    if (path == "/ok") {
      if (!SslWriteAll(ssl, kOk)) break;
    } else if (path == "/ok-then-ticket") {
      if (!SslWriteAll(ssl, kOk)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      if (SSL_new_session_ticket(ssl) != 1 || SSL_do_handshake(ssl) != 1) break;
    } else if (path == "/ok-then-many-tickets") {
      if (!SslWriteAll(ssl, kOk)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      bool sent = true;
      for (int i = 0; i < 200 && sent; ++i) {
        sent = SSL_new_session_ticket(ssl) == 1 && SSL_do_handshake(ssl) == 1;
      }
      if (!sent) break;
    } else if (path == "/204-then-extra") {
      if (!SslWriteAll(ssl, "HTTP/1.1 204 No Content\r\n\r\n")) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      if (!SslWriteAll(ssl, kEvil)) break;
    } else if (path == "/204-with-extra") {
      // Corked, the two records leave together and the client reads them in one go.
      int on = 1, off = 0;
      ::setsockopt(fd, IPPROTO_TCP, TCP_CORK, &on, sizeof(on));
      const bool sent = SslWriteAll(ssl, "HTTP/1.1 204 No Content\r\n\r\n") && SslWriteAll(ssl, kEvil);
      ::setsockopt(fd, IPPROTO_TCP, TCP_CORK, &off, sizeof(off));
      if (!sent) break;
    } else if (!SslWriteAll(ssl, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")) {
      break;
    }
  }
  SSL_free(ssl);
}

}  // namespace egress::testing
