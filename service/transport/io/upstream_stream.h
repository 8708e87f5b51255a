#ifndef EGRESS_SERVICE_TRANSPORT_IO_UPSTREAM_STREAM_H_
#define EGRESS_SERVICE_TRANSPORT_IO_UPSTREAM_STREAM_H_

#include <utility>
#include <variant>

#include "boost/asio/ssl/context.hpp"
#include "boost/beast/core/tcp_stream.hpp"
#include "service/transport/io/tls_stream.h"

namespace egress::transport {

// A TCP stream that is TLS-wrapped or plain, chosen at construction, so that one
// Connection class serves both schemes. Timeouts live on the TCP layer (tcp()). A plain
// stream has no TLS state at all: an SSL object alone is about 8 KiB (heaptrack), which a
// pool of idle plain connections would carry for nothing.
class UpstreamStream {
 public:
  using executor_type = boost::beast::tcp_stream::executor_type;

  UpstreamStream(executor_type executor, boost::asio::ssl::context& tls_context, bool use_tls)
      : stream_(Make(std::move(executor), tls_context, use_tls)) {}

  executor_type get_executor() { return tcp().get_executor(); }
  boost::beast::tcp_stream& tcp() {
    if (auto* tls = std::get_if<TlsStream>(&stream_)) return tls->next_layer();
    return std::get<boost::beast::tcp_stream>(stream_);
  }
  TlsStream& tls() { return std::get<TlsStream>(stream_); }
  bool use_tls() const { return std::holds_alternative<TlsStream>(stream_); }

  // Between exchanges: gives back the TLS record buffers that hold nothing.
  void ReleaseIdleBuffers() {
    if (use_tls()) tls().ReleaseBuffers();
  }

  template <class MutableBuffers, class Handler>
  void async_read_some(const MutableBuffers& buffers, Handler&& handler) {
    if (use_tls()) {
      tls().async_read_some(buffers, std::forward<Handler>(handler));
    } else {
      tcp().async_read_some(buffers, std::forward<Handler>(handler));
    }
  }

  template <class ConstBuffers, class Handler>
  void async_write_some(const ConstBuffers& buffers, Handler&& handler) {
    if (use_tls()) {
      tls().async_write_some(buffers, std::forward<Handler>(handler));
    } else {
      tcp().async_write_some(buffers, std::forward<Handler>(handler));
    }
  }

 private:
  using Stream = std::variant<boost::beast::tcp_stream, TlsStream>;

  static Stream Make(executor_type executor, boost::asio::ssl::context& tls_context,
                     bool use_tls) {
    if (use_tls) {
      return Stream(std::in_place_type<TlsStream>, std::move(executor), tls_context);
    }
    return Stream(std::in_place_type<boost::beast::tcp_stream>, std::move(executor));
  }

  Stream stream_;
};

}  // namespace egress::transport

#endif  // EGRESS_SERVICE_TRANSPORT_IO_UPSTREAM_STREAM_H_
