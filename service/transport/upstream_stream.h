#ifndef EGRESS_SERVICE_TRANSPORT_UPSTREAM_STREAM_H_
#define EGRESS_SERVICE_TRANSPORT_UPSTREAM_STREAM_H_

#include <utility>

#include "boost/asio/ssl.hpp"
#include "boost/beast/core/tcp_stream.hpp"
#include "boost/beast/ssl/ssl_stream.hpp"

namespace egress::transport {

// A TCP stream that is TLS-wrapped or plain, chosen at construction, so that one
// Connection class serves both schemes. Timeouts live on the TCP layer (tcp()).
class UpstreamStream {
 public:
  using TlsStream = boost::beast::ssl_stream<boost::beast::tcp_stream>;
  using executor_type = boost::beast::tcp_stream::executor_type;

  UpstreamStream(executor_type executor, boost::asio::ssl::context& tls_context, bool use_tls)
      : stream_(boost::beast::tcp_stream(std::move(executor)), tls_context), use_tls_(use_tls) {}

  executor_type get_executor() { return stream_.get_executor(); }
  boost::beast::tcp_stream& tcp() { return stream_.next_layer(); }
  TlsStream& tls() { return stream_; }
  bool use_tls() const { return use_tls_; }

  template <class MutableBuffers, class Handler>
  void async_read_some(const MutableBuffers& buffers, Handler&& handler) {
    if (use_tls_) {
      stream_.async_read_some(buffers, std::forward<Handler>(handler));
    } else {
      tcp().async_read_some(buffers, std::forward<Handler>(handler));
    }
  }

  template <class ConstBuffers, class Handler>
  void async_write_some(const ConstBuffers& buffers, Handler&& handler) {
    if (use_tls_) {
      stream_.async_write_some(buffers, std::forward<Handler>(handler));
    } else {
      tcp().async_write_some(buffers, std::forward<Handler>(handler));
    }
  }

 private:
  TlsStream stream_;  // in plain mode only its TCP layer is used
  bool use_tls_;
};

}  // namespace egress::transport

#endif  // EGRESS_SERVICE_TRANSPORT_UPSTREAM_STREAM_H_
