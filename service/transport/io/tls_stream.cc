#include "service/transport/io/tls_stream.h"

#include <openssl/bio.h>
#include <openssl/err.h>

#include <algorithm>
#include <cstring>
#include <exception>

#include "boost/asio/error.hpp"
#include "boost/asio/ssl/error.hpp"

namespace egress::transport {

namespace net = boost::asio;

TlsStream::TlsStream(executor_type executor, net::ssl::context& context)
    : next_(std::move(executor)),
      ssl_(SSL_new(context.native_handle()), &SSL_free),
      send_turn_(next_.get_executor(), net::steady_timer::time_point::max()) {
  if (!ssl_) {
    throw boost::system::system_error(
        boost::beast::error_code(static_cast<int>(ERR_get_error()),
                                 net::error::get_ssl_category()),
        "SSL_new");
  }
  // Writes go out a record at a time; a retried write may come from another address
  // (the same bytes, gathered again).
  SSL_set_mode(ssl_.get(), SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_set_connect_state(ssl_.get());
  BIO_METHOD* method = Method();
  BIO* bio = method ? BIO_new(method) : nullptr;
  if (!bio) {
    throw boost::system::system_error(
        boost::beast::error_code(static_cast<int>(ERR_get_error()),
                                 net::error::get_ssl_category()),
        "BIO_new");
  }
  BIO_set_data(bio, this);
  BIO_set_init(bio, 1);
  SSL_set_bio(ssl_.get(), bio, bio);  // one BIO both ways: the SSL owns it
}

size_t TlsStream::read_some(net::mutable_buffer buffer, size_t max_input,
                            boost::beast::error_code& ec) {
  for (size_t input = 0;;) {
    size_t bytes = 0;
    ERR_clear_error();
    const int result = Read{buffer}(ssl_.get(), &bytes);
    const Step step = Classify(result, bytes);
    if (!step.needs_input) {
      ec = step.ec;
      return step.bytes;
    }
    if (input >= max_input) {
      ec = net::error::message_size;
      return 0;
    }
    const size_t got = next_.socket().read_some(input_.prepare(read_size_.next()), ec);
    Received(got);
    input += got;
    if (ec) {
      ec = AfterSocketError(ec);
      return 0;
    }
  }
}

void TlsStream::Received(size_t bytes) {
  input_.commit(bytes);
  read_size_.Read(read_size_.next(), bytes);
}

void TlsStream::Sent(boost::beast::error_code ec) {
  in_flight_.clear();
  sending_ = false;
  if (ec) send_error_ = ec;
  send_turn_.cancel();
}

void TlsStream::ReleaseBuffers() {
  read_size_.Reset();
  if (input_.size() == 0) input_.shrink_to_fit();
  if (output_.size() == 0) output_.shrink_to_fit();
  if (in_flight_.size() == 0) in_flight_.shrink_to_fit();
  // OpenSSL refuses while a record is partly read or written; before 3.0.14 it did not
  // see decrypted bytes still waiting in a record (CVE-2024-4741), so those are checked.
  if (SSL_has_pending(ssl_.get()) == 0) (void)SSL_free_buffers(ssl_.get());
}

TlsStream::Step TlsStream::Classify(int result, size_t bytes) {
  const int error = SSL_get_error(ssl_.get(), result);
  // The first error queued, as asio reports it.
  const auto queued = static_cast<int>(ERR_get_error());
  switch (error) {
    case SSL_ERROR_NONE:
      return Step{false, {}, bytes};
    case SSL_ERROR_WANT_READ:
      return Step{true, {}, 0};
    case SSL_ERROR_ZERO_RETURN:  // the server's close_notify
      return Step{false, net::error::eof, 0};
    case SSL_ERROR_SSL:
      return Step{false, {queued, net::error::get_ssl_category()}, 0};
    case SSL_ERROR_SYSCALL:
      if (queued == 0) return Step{false, net::ssl::error::unspecified_system_error, 0};
      return Step{false, {queued, net::error::get_ssl_category()}, 0};
    default:  // WANT_WRITE cannot happen: our BIO takes every write
      return Step{false, net::ssl::error::unexpected_result, 0};
  }
}

boost::beast::error_code TlsStream::AfterSocketError(boost::beast::error_code ec) const {
  if (ec != net::error::eof) return ec;
  if ((SSL_get_shutdown(ssl_.get()) & SSL_RECEIVED_SHUTDOWN) == 0) {
    return net::ssl::error::stream_truncated;
  }
  return ec;
}

BIO_METHOD* TlsStream::Method() {
  static BIO_METHOD* const method = [] {
    BIO_METHOD* made = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "egress TLS");
    if (!made) return made;
    BIO_meth_set_read_ex(made, &TlsStream::BioRead);
    BIO_meth_set_write_ex(made, &TlsStream::BioWrite);
    BIO_meth_set_ctrl(made, &TlsStream::BioControl);
    return made;
  }();
  return method;
}

int TlsStream::BioRead(BIO* bio, char* data, size_t size, size_t* read) {
  auto& input = static_cast<TlsStream*>(BIO_get_data(bio))->input_;
  BIO_clear_retry_flags(bio);
  if (input.size() == 0) {
    BIO_set_retry_read(bio);  // OpenSSL answers WANT_READ: the operation reads the socket
    return 0;
  }
  const size_t n = std::min(size, input.size());
  std::memcpy(data, input.data().data(), n);
  input.consume(n);
  *read = n;
  return 1;
}

int TlsStream::BioWrite(BIO* bio, const char* data, size_t size, size_t* written) {
  auto& output = static_cast<TlsStream*>(BIO_get_data(bio))->output_;
  BIO_clear_retry_flags(bio);
  try {
    output.commit(net::buffer_copy(output.prepare(size), net::buffer(data, size)));
  } catch (const std::exception&) {  // out of memory: nothing may unwind through OpenSSL
    return 0;
  }
  *written = size;
  return 1;
}

long TlsStream::BioControl(BIO* bio, int command, long /*number*/, void* /*pointer*/) {
  const auto* stream = static_cast<const TlsStream*>(BIO_get_data(bio));
  switch (command) {
    case BIO_CTRL_FLUSH:  // records are sent by the operation that made them
      return 1;
    case BIO_CTRL_PENDING:
      return static_cast<long>(stream->input_.size());
    case BIO_CTRL_WPENDING:
      return static_cast<long>(stream->output_.size());
    default:
      return 0;
  }
}

}  // namespace egress::transport
