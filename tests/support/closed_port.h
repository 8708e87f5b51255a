#ifndef EGRESS_TESTS_SUPPORT_CLOSED_PORT_H_
#define EGRESS_TESTS_SUPPORT_CLOSED_PORT_H_

namespace egress::testing {

// A loopback port that refuses connections for as long as this object lives. The port stays
// bound without listening: a port that was merely free can be taken by another test's
// listener, or be picked as a connect's own source port, which then connects to itself
// (TCP simultaneous open) and reads back its own request as the answer.
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

}  // namespace egress::testing

#endif  // EGRESS_TESTS_SUPPORT_CLOSED_PORT_H_
