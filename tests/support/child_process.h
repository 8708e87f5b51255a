#ifndef EGRESS_TESTS_SUPPORT_CHILD_PROCESS_H_
#define EGRESS_TESTS_SUPPORT_CHILD_PROCESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

namespace egress::testing {

// A helper server (nginx, prometheus) run by a test; stopped with SIGTERM on destruction.
class ChildProcess {
 public:
  // Starts argv[0] (looked up on PATH) with stdout and stderr appended to log_file.
  ChildProcess(const std::vector<std::string>& argv, const std::string& log_file);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  // False once the process has exited.
  bool Running();
  // Sends a signal; 0 on success, as kill(2).
  int Signal(int signal);
  // Waits for the process to exit; its exit code, or -1 when a signal ended it (also
  // after Running() saw it exit).
  int Wait();

 private:
  pid_t pid_ = -1;
  int exit_code_ = -1;  // once it has exited
};

// Polls until a TCP connection to 127.0.0.1:port succeeds, up to `seconds`.
bool WaitForPort(int port, int seconds);

// A loopback port that nothing listens on right now and that this process was not given before.
int FreePort();

// A loopback port that refuses connections for as long as this object lives (nor is it one
// FreePort gave out). The port stays bound without listening: a port that was merely free
// can be taken by another listener of the test's (a server bound to port 0), or be picked
// as a connect's own source port, which then connects to itself (TCP simultaneous open)
// and reads back its own request as the answer.
class ClosedPort {
 public:
  ClosedPort();
  ~ClosedPort();
  ClosedPort(const ClosedPort&) = delete;
  ClosedPort& operator=(const ClosedPort&) = delete;

  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// The path of a file in the test's runfiles, e.g. Runfile("service/egressd").
std::string Runfile(const std::string& path);

// Runs `command` with /bin/sh and waits for it; returns its standard output, and its wait
// status (as pclose(3), -1 when it could not start) in *status.
std::string RunShell(const std::string& command, int* status);

}  // namespace egress::testing

#endif  // EGRESS_TESTS_SUPPORT_CHILD_PROCESS_H_
