#include "tests/support/keep_alive_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <stdexcept>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace egress::testing {

KeepAliveServer::KeepAliveServer(int timeout_seconds, int max,
                                 std::chrono::milliseconds close_delay)
    : timeout_seconds_(timeout_seconds), max_(max), close_delay_(close_delay) {
  listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (listener_ < 0 || ::bind(listener_, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
      ::listen(listener_, 128) != 0 ||
      ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    throw std::runtime_error("keep-alive server: cannot listen on 127.0.0.1");
  }
  port_ = ntohs(address.sin_port);
  accept_thread_ = std::thread([this] { AcceptLoop(); });
}

KeepAliveServer::~KeepAliveServer() { Stop(); }

void KeepAliveServer::Stop() {
  if (std::exchange(stopped_, true)) return;
  stopping_ = true;
  ::shutdown(listener_, SHUT_RDWR);
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int fd : open_) ::shutdown(fd, SHUT_RDWR);
  }
  accept_thread_.join();
  {
    std::unique_lock<std::mutex> lock(mu_);
    all_closed_.wait(lock, [this] { return open_.empty(); });
  }
  ::close(listener_);
}

std::string KeepAliveServer::Url(const std::string& path) const {
  return absl::StrCat("http://127.0.0.1:", port_, path);
}

void KeepAliveServer::AcceptLoop() {
  while (!stopping_) {
    const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;
    ++accepted_;
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      ::close(fd);
      return;
    }
    open_.insert(fd);
    std::thread([this, fd] { Serve(fd); }).detach();
  }
}

bool KeepAliveServer::WaitReadable(int fd, Clock::time_point until) const {
  while (!stopping_) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
    if (left <= 0) return false;
    // Slices, so that a stopping server is noticed; the last one ends on time.
    pollfd readable{fd, POLLIN, 0};
    const int ready = ::poll(&readable, 1, static_cast<int>(std::min<int64_t>(left, 50)));
    if (ready != 0) return true;  // readable, hung up, or failed: the read tells
  }
  return false;
}

bool KeepAliveServer::ReadRequest(int fd, std::string& pending) const {
  const auto give_up = Clock::now() + std::chrono::seconds(10);
  const auto read_more = [&] {
    char buffer[4096];
    if (!WaitReadable(fd, give_up)) return false;
    const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) return false;
    pending.append(buffer, static_cast<size_t>(n));
    return true;
  };
  size_t head_end;
  while ((head_end = pending.find("\r\n\r\n")) == std::string::npos) {
    if (!read_more()) return false;
  }
  size_t body_bytes = 0;
  for (absl::string_view line : absl::StrSplit(pending.substr(0, head_end), "\r\n")) {
    if (absl::StartsWithIgnoreCase(line, "content-length:")) {
      (void)absl::SimpleAtoi(absl::StripAsciiWhitespace(line.substr(15)), &body_bytes);
    }
  }
  while (pending.size() < head_end + 4 + body_bytes) {
    if (!read_more()) return false;
  }
  pending.erase(0, head_end + 4 + body_bytes);
  return true;
}

bool KeepAliveServer::AnyBytesUntil(int fd, Clock::time_point until) const {
  bool any = false;
  while (WaitReadable(fd, until)) {
    char buffer[4096];
    const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) break;
    any = true;
  }
  return any;
}

void KeepAliveServer::Serve(int fd) {
  std::string keep_alive = absl::StrCat("timeout=", timeout_seconds_);
  if (max_ > 0) absl::StrAppend(&keep_alive, ", max=", max_);
  const std::string response = absl::StrCat(
      "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\nKeep-Alive: ",
      keep_alive, "\r\n\r\nok");
  const auto timeout = std::chrono::seconds(timeout_seconds_);
  std::string pending;
  int served = 0;
  auto idle_since = Clock::now();
  bool closing = false;
  while (!stopping_) {
    if (pending.empty() && !WaitReadable(fd, idle_since + timeout)) {
      if (!stopping_) {
        ++closed_at_timeout_;
        closing = true;
      }
      break;
    }
    if (!ReadRequest(fd, pending)) break;  // the client closed
    if (::send(fd, response.data(), response.size(), MSG_NOSIGNAL) !=
        static_cast<ssize_t>(response.size())) {
      break;
    }
    ++responses_;
    idle_since = Clock::now();
    if (max_ > 0 && ++served == max_) {
      ++closed_at_max_;
      closing = true;
      break;
    }
  }
  if (closing) {
    // From the decision on, nothing is answered; the FIN leaves after close_delay_, and
    // the client may still be sending when it arrives.
    bool late = !pending.empty() || AnyBytesUntil(fd, Clock::now() + close_delay_);
    ::shutdown(fd, SHUT_WR);
    late = AnyBytesUntil(fd, Clock::now() + std::chrono::seconds(2)) || late;
    if (late) ++on_closing_;
  }
  std::lock_guard<std::mutex> lock(mu_);
  ::close(fd);
  open_.erase(fd);
  if (open_.empty()) all_closed_.notify_all();
}

}  // namespace egress::testing
