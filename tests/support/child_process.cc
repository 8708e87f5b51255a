#include "tests/support/child_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>


namespace egress::testing {

ChildProcess::ChildProcess(const std::vector<std::string>& argv, const std::string& log_file) {
  pid_ = fork();
  if (pid_ != 0) return;
  const int log = open(log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (log >= 0) {
    dup2(log, 1);
    dup2(log, 2);
  }
  std::vector<char*> args;
  for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  execvp(args[0], args.data());
  _exit(127);
}

ChildProcess::~ChildProcess() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  waitpid(pid_, nullptr, 0);
}

bool ChildProcess::Running() {
  if (pid_ <= 0) return false;
  int status;
  if (waitpid(pid_, &status, WNOHANG) == pid_) {
    pid_ = -1;
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  return pid_ > 0;
}

int ChildProcess::Signal(int signal) { return pid_ > 0 ? kill(pid_, signal) : -1; }

int ChildProcess::Wait() {
  if (pid_ <= 0) return exit_code_;
  int status = 0;
  const bool exited = waitpid(pid_, &status, 0) == pid_ && WIFEXITED(status);
  pid_ = -1;
  exit_code_ = exited ? WEXITSTATUS(status) : -1;
  return exit_code_;
}

bool WaitForPort(int port, int seconds) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < give_up) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    close(fd);
    if (ok) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

namespace {

// The ports FreePort and ClosedPort gave out: the kernel may hand the same unused port to
// two binds in a row once the first socket is closed, so a fixture asking for several
// ports (nginx listens on ten) would otherwise get one twice.
std::mutex given_mutex;  // std::mutex: TSan sees it (Debian's Abseil is not instrumented)
std::set<int>& GivenPorts() {
  static auto* given = new std::set<int>();
  return *given;
}

// Binds `fd` to a loopback port the kernel picks: the port, or 0 when it could not.
int BindLoopback(int fd) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof address;
  const bool bound = bind(fd, reinterpret_cast<sockaddr*>(&address), size) == 0 &&
                     getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size) == 0;
  return bound ? ntohs(address.sin_port) : 0;
}

}  // namespace

int FreePort() {
  std::lock_guard<std::mutex> lock(given_mutex);
  while (true) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) throw std::runtime_error("FreePort: no socket (out of descriptors?)");
    const int port = BindLoopback(fd);
    close(fd);
    if (port == 0) throw std::runtime_error("FreePort: no loopback port to bind");
    if (GivenPorts().insert(port).second) return port;
  }
}

ClosedPort::ClosedPort() {
  std::lock_guard<std::mutex> lock(given_mutex);
  while (true) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) throw std::runtime_error("ClosedPort: no socket (out of descriptors?)");
    port_ = BindLoopback(fd_);
    if (port_ == 0) {
      close(fd_);
      throw std::runtime_error("ClosedPort: no loopback port to bind");
    }
    if (GivenPorts().insert(port_).second) return;
    close(fd_);  // FreePort gave it out: its listener may not have bound it yet
  }
}

ClosedPort::~ClosedPort() { close(fd_); }

std::string Runfile(const std::string& path) {
  const char* root = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  return std::string(root ? root : ".") + "/" + (workspace ? workspace : "") + "/" + path;
}

std::string RunShell(const std::string& command, int* status) {
  std::string output;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    *status = -1;
    return output;
  }
  char buffer[4096];
  size_t got;
  while ((got = fread(buffer, 1, sizeof(buffer), pipe)) > 0) output.append(buffer, got);
  *status = pclose(pipe);
  return output;
}

}  // namespace egress::testing
