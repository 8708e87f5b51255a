#include "service/transport/http1/idle_probe.h"

#include <openssl/ssl.h>
#include <poll.h>

#include <cstddef>

#include "boost/asio/buffer.hpp"
#include "boost/asio/error.hpp"

namespace egress::transport {

namespace net = boost::asio;
namespace beast = boost::beast;

namespace {

// TLS records an idle connection may take in before its reuse (session tickets: servers
// send one or two of a few hundred bytes after a handshake); more, and it is not reused.
constexpr size_t kMaxIdleTlsInput = 16 * 1024;

// The TLS part: nothing but TLS housekeeping waits in OpenSSL or on the socket
// (`socket_readable`).
IdleProbe ProbeTls(UpstreamStream& stream, bool socket_readable) {
  // Records read along with the last response wait in the TLS stream or inside OpenSSL,
  // where neither poll nor the connection's buffer sees them (a body after a 204, an
  // unsolicited 408).
  SSL* ssl = stream.tls().native_handle();
  if (!socket_readable && SSL_has_pending(ssl) == 0 && stream.tls().buffered_input() == 0) {
    return IdleProbe::kQuiet;  // the common case costs no syscall
  }
  // A read that must not wait: OpenSSL takes in session tickets and stops at
  // would_block; an application byte, close_notify, EOF, error, or more housekeeping
  // than a server sends between two requests all end up refusing. The byte read is
  // lost, but so is the connection.
  auto& socket = stream.tcp().socket();
  beast::error_code ec;
  socket.non_blocking(true, ec);
  if (ec) return IdleProbe::kClosedOrNoisy;
  char byte;
  const size_t read = stream.tls().read_some(net::buffer(&byte, 1), kMaxIdleTlsInput, ec);
  beast::error_code ignored;
  socket.non_blocking(false, ignored);  // the next async operation sets what it needs
  if (read != 0 || ec != net::error::would_block) return IdleProbe::kClosedOrNoisy;
  return IdleProbe::kQuietAfterTls;
}

}  // namespace

IdleProbe ProbeIdle(UpstreamStream& stream) {
  // A poll that does not wait. A server that closed may have sent a TLS close_notify
  // first, so the hang-up is looked for even when there are bytes to read.
  pollfd check{stream.tcp().socket().native_handle(), POLLIN | POLLRDHUP, 0};
  if (::poll(&check, 1, 0) < 0) return IdleProbe::kClosedOrNoisy;
  if (check.revents & (POLLRDHUP | POLLHUP | POLLERR)) return IdleProbe::kClosedOrNoisy;
  // Unrequested bytes: garbage on plain HTTP; on TLS they may be a session ticket.
  if (!stream.use_tls()) {
    return (check.revents & POLLIN) ? IdleProbe::kClosedOrNoisy : IdleProbe::kQuiet;
  }
  return ProbeTls(stream, check.revents & POLLIN);
}

}  // namespace egress::transport
