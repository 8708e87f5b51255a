// A simulated WAN link: a TUN device in each of two network namespaces, and every packet
// that leaves one delivered into the other after a fixed one-way delay. The kernel here
// has no netem; this gives a real round-trip time to TCP, TLS and everything above.
//
//   delay_link --netns_a=NAME --netns_b=NAME --device=NAME --one_way_delay_us=N
//
// Creates the device in both namespaces (they must exist: `ip netns add`), prints
// "ready" on stdout, and forwards until SIGTERM or SIGINT. The devices disappear with the
// process. Addresses and routes are the caller's (`ip -n NAME addr add ...`).
//
// One thread per direction; a packet waits in a bounded FIFO until it is due, and a full
// FIFO drops, as a router queue would. The devices take segmentation and checksum
// offload (a virtio-net header on each packet, passed through untouched), so a read or a
// write moves up to 64 KiB of TCP segments at once, as a NIC with TSO would: this is what
// lets one thread per direction carry well over 100 MB/s.
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"

ABSL_FLAG(std::string, netns_a, "", "the first network namespace (ip netns add)");
ABSL_FLAG(std::string, netns_b, "", "the second network namespace");
ABSL_FLAG(std::string, device, "wan0", "the TUN device's name in both");
ABSL_FLAG(int64_t, one_way_delay_us, 0, "how long each packet waits, in microseconds");

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "delay_link: %s: %s\n", what.c_str(), std::strerror(errno));
  std::exit(1);
}

// Opens a TUN device named `device` inside the network namespace `netns`.
int OpenTunIn(const std::string& netns, const std::string& device) {
  const int original = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  const int target = open(("/var/run/netns/" + netns).c_str(), O_RDONLY | O_CLOEXEC);
  if (original < 0 || target < 0) Die("open namespace " + netns);
  if (setns(target, CLONE_NEWNET) != 0) Die("enter namespace " + netns);
  const int tun = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (tun < 0) Die("open /dev/net/tun");
  ifreq request{};
  request.ifr_flags = IFF_TUN | IFF_NO_PI | IFF_VNET_HDR;
  std::snprintf(request.ifr_name, IFNAMSIZ, "%s", device.c_str());
  if (ioctl(tun, TUNSETIFF, &request) != 0) Die("create " + device + " in " + netns);
  if (ioctl(tun, TUNSETOFFLOAD, TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6) != 0) Die("offload");
  if (setns(original, CLONE_NEWNET) != 0) Die("leave namespace " + netns);
  close(original);
  close(target);
  return tun;
}

// Packets from `in` written to `out` `delay` after they were read.
class Direction {
 public:
  // About 100 ms at 300 MB/s; past it packets are lost.
  static constexpr size_t kMaxQueuedBytes = 32 << 20;

  Direction(int in, int out, Clock::duration delay, int stop_fd)
      : in_(in), out_(out), delay_(delay), stop_fd_(stop_fd), scratch_(kMaxPacketBytes) {}

  void Run() {
    // Wake when a packet is due, not up to 50 us later (the default timer slack).
    prctl(PR_SET_TIMERSLACK, 1);
    for (;;) {
      SendDue();
      pollfd fds[2] = {{in_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
      const int ready = ppoll(fds, 2, TimeUntilNextDue(), nullptr);
      if (ready < 0 && errno != EINTR) Die("poll");
      if (fds[1].revents) return;
      if (fds[0].revents & POLLIN) ReadAvailable();
    }
  }

  uint64_t dropped() const { return dropped_; }

 private:
  static constexpr size_t kMaxPacketBytes = 65536 + 64;  // a GSO packet and its header

  struct Packet {
    Clock::time_point due;
    std::vector<char> bytes;
  };

  void ReadAvailable() {
    for (;;) {
      const ssize_t n = read(in_, scratch_.data(), scratch_.size());
      if (n < 0) {
        if (errno == EAGAIN || errno == EINTR) return;
        Die("read");
      }
      if (queued_bytes_ + n > kMaxQueuedBytes) {
        ++dropped_;
        continue;
      }
      queue_.push_back({Clock::now() + delay_, {scratch_.begin(), scratch_.begin() + n}});
      queued_bytes_ += n;
    }
  }

  void SendDue() {
    const Clock::time_point now = Clock::now();
    while (!queue_.empty() && queue_.front().due <= now) {
      const std::vector<char>& bytes = queue_.front().bytes;
      // A write the stack refuses (no buffer, device going down) is a lost packet, as
      // on a real link; TCP recovers.
      if (write(out_, bytes.data(), bytes.size()) < 0) ++dropped_;
      queued_bytes_ -= bytes.size();
      queue_.pop_front();
    }
  }

  const timespec* TimeUntilNextDue() {
    if (queue_.empty()) return nullptr;
    const auto wait = std::chrono::duration_cast<std::chrono::nanoseconds>(
        queue_.front().due - Clock::now());
    const int64_t ns = std::max<int64_t>(0, wait.count());
    timeout_ = {static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
    return &timeout_;
  }

  const int in_;
  const int out_;
  const Clock::duration delay_;
  const int stop_fd_;
  std::vector<char> scratch_;
  std::deque<Packet> queue_;
  size_t queued_bytes_ = 0;
  uint64_t dropped_ = 0;
  timespec timeout_{};
};

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string netns_a = absl::GetFlag(FLAGS_netns_a);
  const std::string netns_b = absl::GetFlag(FLAGS_netns_b);
  const std::string device = absl::GetFlag(FLAGS_device);
  const auto delay = std::chrono::microseconds(absl::GetFlag(FLAGS_one_way_delay_us));

  // Signals are taken by sigwait below, in this thread only.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  const int tun_a = OpenTunIn(netns_a, device);
  const int tun_b = OpenTunIn(netns_b, device);
  const int stop_fd = eventfd(0, EFD_CLOEXEC);
  if (stop_fd < 0) Die("eventfd");

  Direction a_to_b(tun_a, tun_b, delay, stop_fd);
  Direction b_to_a(tun_b, tun_a, delay, stop_fd);
  std::thread forward([&] { a_to_b.Run(); });
  std::thread backward([&] { b_to_a.Run(); });
  std::printf("ready\n");
  std::fflush(stdout);

  int signal_number = 0;
  sigwait(&signals, &signal_number);
  const uint64_t one = 1;
  if (write(stop_fd, &one, sizeof(one)) != sizeof(one)) Die("stop");
  forward.join();
  backward.join();
  std::fprintf(stderr, "delay_link: stopped; packets dropped: %llu\n",
               static_cast<unsigned long long>(a_to_b.dropped() + b_to_a.dropped()));
  return 0;
}
