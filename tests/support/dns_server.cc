#include "tests/support/dns_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <optional>

#include "absl/strings/ascii.h"

namespace egress::testing {
namespace {

constexpr uint16_t kTypeA = 1;
constexpr uint16_t kClassIn = 1;
constexpr uint16_t kRcodeServfail = 2;
constexpr uint16_t kRcodeNxdomain = 3;
constexpr size_t kHeaderBytes = 12;

uint16_t Read16(const std::string& bytes, size_t at) {
  return static_cast<uint16_t>(static_cast<uint8_t>(bytes[at]) << 8 |
                               static_cast<uint8_t>(bytes[at + 1]));
}

void Append16(std::string& out, uint16_t value) {
  out.push_back(static_cast<char>(value >> 8));
  out.push_back(static_cast<char>(value & 0xff));
}

int CountFor(const std::map<std::string, int>& counts, const std::string& name) {
  const auto it = counts.find(absl::AsciiStrToLower(name));
  return it == counts.end() ? 0 : it->second;
}

}  // namespace

std::unique_ptr<DnsServer> DnsServer::Start(const std::string& ip, uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = inet_addr(ip.c_str());
  socklen_t length = sizeof(address);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    ::close(fd);
    return nullptr;
  }
  return std::unique_ptr<DnsServer>(new DnsServer(fd, ntohs(address.sin_port)));
}

DnsServer::DnsServer(int fd, uint16_t port) : fd_(fd), port_(port) {
  thread_ = std::thread([this] { Serve(); });
}

DnsServer::~DnsServer() {
  stop_ = true;
  thread_.join();
  ::close(fd_);
}

void DnsServer::Answer(const std::string& name, const std::string& ipv4) {
  AnswerAll(name, {ipv4}, 60);
}

void DnsServer::AnswerAll(const std::string& name, const std::vector<std::string>& ipv4s,
                          uint32_t ttl) {
  Records records;
  for (const auto& ipv4 : ipv4s) records.ipv4s.push_back(ntohl(inet_addr(ipv4.c_str())));
  records.ttl = ttl;
  std::lock_guard<std::mutex> lock(mu_);
  Forget(name);
  answers_[absl::AsciiStrToLower(name)] = std::move(records);
}

void DnsServer::Ignore(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  Forget(name);
  ignored_.insert(absl::AsciiStrToLower(name));
}

void DnsServer::Fail(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  Forget(name);
  failing_.insert(absl::AsciiStrToLower(name));
}

void DnsServer::Forget(const std::string& name) {
  const std::string key = absl::AsciiStrToLower(name);
  answers_.erase(key);
  ignored_.erase(key);
  failing_.erase(key);
}

int DnsServer::Queries(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  return CountFor(queries_, name);
}

int DnsServer::Unanswered(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  return CountFor(unanswered_, name);
}

void DnsServer::Serve() {
  while (!stop_) {
    pollfd ready{fd_, POLLIN, 0};
    if (::poll(&ready, 1, 20) <= 0) continue;  // a short wait, to see stop_
    char buffer[512];
    sockaddr_storage peer{};
    socklen_t peer_length = sizeof(peer);
    const ssize_t got = ::recvfrom(fd_, buffer, sizeof(buffer), 0,
                                   reinterpret_cast<sockaddr*>(&peer), &peer_length);
    if (got <= 0) continue;
    const std::string reply = Reply(std::string(buffer, static_cast<size_t>(got)));
    if (reply.empty()) continue;
    ::sendto(fd_, reply.data(), reply.size(), 0, reinterpret_cast<sockaddr*>(&peer),
             peer_length);
  }
}

std::string DnsServer::Reply(const std::string& query) {
  // Header, then the question: labels up to an empty one, then type and class.
  if (query.size() < kHeaderBytes || Read16(query, 4) != 1) return "";
  std::string name;
  size_t at = kHeaderBytes;
  while (at < query.size() && query[at] != 0) {
    const size_t length = static_cast<uint8_t>(query[at]);
    if (length > 63 || at + 1 + length >= query.size()) return "";
    if (!name.empty()) name.push_back('.');
    name.append(query, at + 1, length);
    at += 1 + length;
  }
  if (at + 5 > query.size()) return "";
  const size_t question_end = at + 5;
  const uint16_t type = Read16(query, at + 1);
  name = absl::AsciiStrToLower(name);

  Records records;
  uint16_t rcode = kRcodeNxdomain;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++queries_[name];
    if (ignored_.count(name)) {
      ++unanswered_[name];
      return "";
    }
    if (failing_.count(name)) rcode = kRcodeServfail;
    if (const auto it = answers_.find(name); it != answers_.end()) {
      rcode = 0;
      if (type == kTypeA) records = it->second;
    }
  }
  std::string reply = query.substr(0, 2);  // the query's id
  const uint16_t recursion_desired = Read16(query, 2) & 0x0100;
  Append16(reply, 0x8000 | recursion_desired | 0x0080 | rcode);
  Append16(reply, 1);                                             // questions
  Append16(reply, static_cast<uint16_t>(records.ipv4s.size()));  // answers
  Append16(reply, 0);                                             // authority
  Append16(reply, 0);                                             // additional
  reply.append(query, kHeaderBytes, question_end - kHeaderBytes);
  for (const uint32_t address : records.ipv4s) {
    Append16(reply, 0xc000 | kHeaderBytes);  // the name: a pointer to the question's
    Append16(reply, kTypeA);
    Append16(reply, kClassIn);
    Append16(reply, static_cast<uint16_t>(records.ttl >> 16));
    Append16(reply, static_cast<uint16_t>(records.ttl & 0xffff));
    Append16(reply, 4);
    Append16(reply, static_cast<uint16_t>(address >> 16));
    Append16(reply, static_cast<uint16_t>(address & 0xffff));
  }
  return reply;
}

}  // namespace egress::testing
