#ifndef EGRESS_SERVICE_DATAPLANE_CALLER_STREAM_H_
#define EGRESS_SERVICE_DATAPLANE_CALLER_STREAM_H_

// The bytes of one caller's connection to the data plane, under its ServerSession: the
// accepted TCP socket (cleartext), or TLS over it once TlsAcceptor has done the
// handshake. An asio stream, with the few socket calls a session makes.

#include <memory>
#include <utility>

#include "boost/asio/any_io_executor.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "service/fetch/certificate_names.h"
#include "service/transport/io/tls_stream.h"

namespace egress::dataplane {

class CallerStream {
 public:
  using executor_type = boost::asio::any_io_executor;

  // Cleartext (implicit: the listener hands out sockets).
  CallerStream(boost::asio::ip::tcp::socket socket)  // NOLINT(runtime/explicit)
      : plain_(std::move(socket)) {}
  // TLS whose handshake is done; `certificate`: the names of the caller's verified
  // certificate (mTLS), or none.
  CallerStream(std::unique_ptr<transport::TlsStream> tls, fetch::CertificateNames certificate)
      : plain_(tls->get_executor()), tls_(std::move(tls)), certificate_(std::move(certificate)) {}

  executor_type get_executor() { return tls_ ? tls_->get_executor() : plain_.get_executor(); }

  // Handler: void(error_code, size_t).
  template <class MutableBuffers, class Handler>
  void async_read_some(const MutableBuffers& buffers, Handler&& handler) {
    if (tls_) return tls_->async_read_some(buffers, std::forward<Handler>(handler));
    plain_.async_read_some(buffers, std::forward<Handler>(handler));
  }
  // Handler: void(error_code, size_t).
  template <class ConstBuffers, class Handler>
  void async_write_some(const ConstBuffers& buffers, Handler&& handler) {
    if (tls_) return tls_->async_write_some(buffers, std::forward<Handler>(handler));
    plain_.async_write_some(buffers, std::forward<Handler>(handler));
  }

  boost::asio::ip::tcp::endpoint remote_endpoint(boost::system::error_code& ec) const {
    return socket().remote_endpoint(ec);
  }
  template <class Option>
  void set_option(const Option& option, boost::system::error_code& ec) {
    socket().set_option(option, ec);
  }
  // Closes the socket (no TLS close_notify: gRPC's library server sends none either).
  void close(boost::system::error_code& ec) { socket().close(ec); }

  const fetch::CertificateNames& certificate() const { return certificate_; }

 private:
  boost::asio::ip::tcp::socket& socket() { return tls_ ? tls_->next_layer().socket() : plain_; }
  const boost::asio::ip::tcp::socket& socket() const {
    return tls_ ? tls_->next_layer().socket() : plain_;
  }

  boost::asio::ip::tcp::socket plain_;  // cleartext's; unopened under TLS
  std::unique_ptr<transport::TlsStream> tls_;
  fetch::CertificateNames certificate_;
};

}  // namespace egress::dataplane

#endif  // EGRESS_SERVICE_DATAPLANE_CALLER_STREAM_H_
