#include "bench/endless_upstream.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>
#include <string>

#include "absl/strings/str_split.h"

namespace egress::bench {
namespace {

bool SendAll(int fd, const std::string& bytes) {
  for (size_t sent = 0; sent < bytes.size();) {
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

// The path of the request head read from the socket; "" when the peer went first.
std::string ReadPath(int fd) {
  std::string head;
  char buffer[4096];
  while (head.find("\r\n\r\n") == std::string::npos && head.size() < 64 * 1024) {
    const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) return "";
    head.append(buffer, static_cast<size_t>(n));
  }
  const std::vector<std::string> line = absl::StrSplit(head.substr(0, head.find("\r\n")), ' ');
  return line.size() < 2 ? "" : line[1].substr(0, line[1].find('?'));
}

}  // namespace

EndlessUpstream::EndlessUpstream() {
  listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (listener_ < 0 || ::bind(listener_, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
      ::listen(listener_, 128) != 0 ||
      ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    throw std::runtime_error("endless upstream: cannot listen on 127.0.0.1");
  }
  port_ = ntohs(address.sin_port);
  accept_thread_ = std::thread([this] { AcceptLoop(); });
}

EndlessUpstream::~EndlessUpstream() {
  stopping_ = true;
  ::shutdown(listener_, SHUT_RDWR);
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int fd : open_) ::shutdown(fd, SHUT_RDWR);
  }
  accept_thread_.join();
  std::unique_lock<std::mutex> lock(mu_);
  all_closed_.wait(lock, [this] { return open_.empty(); });
  ::close(listener_);
}

void EndlessUpstream::AcceptLoop() {
  while (!stopping_) {
    const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      ::close(fd);
      return;
    }
    open_.insert(fd);
    std::thread([this, fd] { Serve(fd); }).detach();
  }
}

void EndlessUpstream::Serve(int fd) {
  const std::string path = ReadPath(fd);
  std::string start, repeat;
  if (path == "/body") {
    start = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
    repeat = "4000\r\n" + std::string(0x4000, 'b') + "\r\n";
  } else if (path == "/length") {
    start = "HTTP/1.1 200 OK\r\nContent-Length: 1152921504606846976\r\n\r\n";
    repeat = std::string(16384, 'l');
  } else if (path == "/headers") {
    start = "HTTP/1.1 200 OK\r\n";
    repeat = "X-Endless: " + std::string(1000, 'h') + "\r\n";
  } else if (path == "/chunk-ext") {
    start = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=";
    repeat = std::string(16384, 'e');
  } else if (path == "/trailers") {
    start = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n";
    repeat = "X-Trailer: " + std::string(1000, 't') + "\r\n";
  }
  if (!start.empty() && SendAll(fd, start)) {
    while (!stopping_ && SendAll(fd, repeat)) bytes_sent_ += repeat.size();
  }
  std::lock_guard<std::mutex> lock(mu_);
  ::close(fd);
  open_.erase(fd);
  if (open_.empty()) all_closed_.notify_all();
}

}  // namespace egress::bench
