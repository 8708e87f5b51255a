#ifndef EGRESS_SERVICE_TRANSPORT_IO_TLS_STREAM_H_
#define EGRESS_SERVICE_TRANSPORT_IO_TLS_STREAM_H_

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <utility>

#include "boost/asio/buffer.hpp"
#include "boost/asio/compose.hpp"
#include "boost/asio/post.hpp"
#include "boost/asio/ssl/context.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/asio/write.hpp"
#include "boost/beast/core/error.hpp"
#include "boost/beast/core/flat_buffer.hpp"
#include "boost/beast/core/tcp_stream.hpp"
#include "service/transport/io/read_size.h"

namespace egress::transport {

// The client side of TLS over a TCP stream, holding no record buffers while idle.
// asio's ssl::stream keeps four 17 KiB buffers for a connection's whole life (two of its
// own and a BIO pair's): about 70 KiB that every idle pooled connection carries for
// nothing. Here OpenSSL reads and writes its records through a BIO of ours, from and to
// two buffers that grow when records pass; ReleaseBuffers() gives them, and OpenSSL's
// own, back. Errors are those asio's stream reports, in its categories.
//
// One read and one write at a time (an HTTP/1.1 Connection runs one operation at a time;
// an HTTP/2 session keeps a read in flight while it writes), on the TCP stream's
// executor; its timeouts apply to every socket read and write. Records go out in the
// order OpenSSL made them, one socket write at a time: a read's records (the answer to a
// TLS 1.3 KeyUpdate, an alert) wait for the write's on their way. After the handshake,
// a write never needs to read: renegotiation, which would, must be off
// (SSL_OP_NO_RENEGOTIATION) when reads and writes overlap; a write that would read while
// a read is in flight fails with already_started instead.
class TlsStream {
 public:
  using executor_type = boost::beast::tcp_stream::executor_type;

  TlsStream(executor_type executor, boost::asio::ssl::context& context);
  // OpenSSL's BIO points here.
  TlsStream(const TlsStream&) = delete;
  TlsStream& operator=(const TlsStream&) = delete;

  executor_type get_executor() { return next_.get_executor(); }
  boost::beast::tcp_stream& next_layer() { return next_; }
  SSL* native_handle() { return ssl_.get(); }

  // Handler: void(error_code).
  template <class Handler>
  void async_handshake(Handler&& handler) {
    boost::asio::async_compose<Handler, void(boost::beast::error_code)>(
        Operation<Handshake>{*this, Handshake{}}, handler, next_);
  }

  // Handler: void(error_code, size_t). Reads into the first non-empty buffer.
  template <class MutableBuffers, class Handler>
  void async_read_some(const MutableBuffers& buffers, Handler&& handler) {
    boost::asio::async_compose<Handler, void(boost::beast::error_code, size_t)>(
        Operation<Read>{*this, Read{FirstNonEmpty<boost::asio::mutable_buffer>(buffers)}},
        handler, next_);
  }

  // Handler: void(error_code, size_t). Writes one record's worth at most.
  template <class ConstBuffers, class Handler>
  void async_write_some(const ConstBuffers& buffers, Handler&& handler) {
    boost::asio::async_compose<Handler, void(boost::beast::error_code, size_t)>(
        Operation<Write<ConstBuffers>>{*this, Write<ConstBuffers>{buffers}},
        handler, next_);
  }

  // Reads without waiting: the socket must be non-blocking (would_block when nothing is
  // there). Takes in what OpenSSL handles itself, such as session tickets, but stops
  // reading the socket once `max_input` bytes have come (a server that keeps sending
  // them would keep the caller here) and fails with message_size instead.
  size_t read_some(boost::asio::mutable_buffer buffer, size_t max_input,
                   boost::beast::error_code& ec);

  // Frees the record buffers that hold nothing, ours and OpenSSL's. Between exchanges:
  // they are allocated again when records pass.
  void ReleaseBuffers();

  // Records received and not yet taken by OpenSSL.
  size_t buffered_input() const { return input_.size(); }

 private:
  // What one call into OpenSSL came to.
  struct Step {
    bool needs_input = false;  // try again once more bytes have arrived
    boost::beast::error_code ec;
    size_t bytes = 0;
  };

  struct Handshake {
    static constexpr bool kReportsBytes = false;
    int operator()(SSL* ssl, size_t* /*bytes*/) const { return SSL_do_handshake(ssl); }
  };
  struct Read {
    static constexpr bool kReportsBytes = true;
    boost::asio::mutable_buffer buffer;
    int operator()(SSL* ssl, size_t* bytes) const {
      if (buffer.size() == 0) return 1;  // as asio: an empty read completes at once
      return SSL_read_ex(ssl, buffer.data(), buffer.size(), bytes);
    }
  };
  template <class ConstBuffers>
  struct Write {
    static constexpr bool kReportsBytes = true;
    ConstBuffers buffers;
    int operator()(SSL* ssl, size_t* bytes) const {
      // Small pieces (a head's fields) go out as one record: gathered first, as asio does.
      char gathered[kMaxRecordPlaintext];
      const boost::asio::const_buffer first = FirstNonEmpty<boost::asio::const_buffer>(buffers);
      boost::asio::const_buffer data = first;
      if (first.size() < sizeof(gathered)) {
        data = boost::asio::buffer(gathered, boost::asio::buffer_copy(
                                                 boost::asio::buffer(gathered), buffers));
      }
      if (data.size() == 0) return 1;
      return SSL_write_ex(ssl, data.data(), std::min(data.size(), sizeof(gathered)), bytes);
    }
  };

  // The composed operation: calls into OpenSSL, sends what it produced, reads what it
  // asks for, and calls again until it is done.
  template <class Attempt>
  struct Operation {
    TlsStream& stream;
    Attempt attempt;
    enum class Waiting {
      kNothing,
      kTurn,    // the other operation's socket write, before ours may start
      kOutput,  // our socket write
      kInput,   // our socket read
    } waiting = Waiting::kNothing;
    Step step{};

    template <class Self>
    void operator()(Self& self, boost::beast::error_code ec = {}, size_t transferred = 0) {
      switch (waiting) {
        case Waiting::kNothing:
          break;
        case Waiting::kTurn:  // woken by a cancel: ec says nothing
          return SendOutput(self);
        case Waiting::kOutput:
          stream.Sent(ec);
          // An alert that could not be sent: the TLS error it reports is the one to keep.
          if (ec && !step.ec) return Complete(self, ec, 0);
          if (ec) return Complete(self, step.ec, 0);
          return AfterOutput(self);
        case Waiting::kInput:
          stream.reading_ = false;
          stream.Received(transferred);
          if (ec) return Complete(self, stream.AfterSocketError(ec), 0);
          break;
      }
      size_t bytes = 0;
      ERR_clear_error();
      const int result = attempt(stream.ssl_.get(), &bytes);
      step = stream.Classify(result, bytes);
      // Handshake messages, a request's records, an alert.
      if (stream.output_.size() > 0) return SendOutput(self);
      if (step.needs_input) return ReadInput(self);
      if (waiting != Waiting::kNothing) return Complete(self, step.ec, step.bytes);
      // Done inside the caller's call (bytes OpenSSL had decrypted already): the handler
      // runs later, never within the initiating function.
      auto executor = self.get_executor();  // the handler's, as for any other completion
      boost::asio::post(std::move(executor),
                        [done = step, self = std::move(self)]() mutable {
                          Complete(self, done.ec, done.bytes);
                        });
    }

    // Writes what OpenSSL has made, after the other operation's write if one is on its
    // way (that one may take ours along: what is in output_ goes out whole).
    template <class Self>
    void SendOutput(Self& self) {
      if (stream.send_error_) return Complete(self, stream.send_error_, 0);
      if (stream.output_.size() == 0) return AfterOutput(self);  // the other write took it
      if (stream.sending_) {
        waiting = Waiting::kTurn;
        return stream.send_turn_.async_wait(std::move(self));
      }
      waiting = Waiting::kOutput;
      stream.sending_ = true;
      // Records made while this write is on its way go to output_, not under it.
      swap(stream.output_, stream.in_flight_);
      boost::asio::async_write(stream.next_, stream.in_flight_.data(), std::move(self));
    }

    template <class Self>
    void AfterOutput(Self& self) {
      if (!step.needs_input) return Complete(self, step.ec, step.bytes);
      return ReadInput(self);
    }

    template <class Self>
    void ReadInput(Self& self) {
      if (stream.reading_) return Complete(self, boost::asio::error::already_started, 0);
      stream.reading_ = true;
      waiting = Waiting::kInput;
      stream.next_.async_read_some(stream.input_.prepare(stream.read_size_.next()),
                                   std::move(self));
    }

    template <class Self>
    static void Complete(Self& self, boost::beast::error_code ec, size_t bytes) {
      if constexpr (Attempt::kReportsBytes) {
        self.complete(ec, bytes);
      } else {
        self.complete(ec);
      }
    }
  };

  // The plaintext one record carries at most (TLS's limit).
  static constexpr size_t kMaxRecordPlaintext = 16 * 1024;

  template <class Buffer, class Buffers>
  static Buffer FirstNonEmpty(const Buffers& buffers) {
    for (auto it = boost::asio::buffer_sequence_begin(buffers);
         it != boost::asio::buffer_sequence_end(buffers); ++it) {
      Buffer buffer(*it);
      if (buffer.size() > 0) return buffer;
    }
    return Buffer();
  }

  void Received(size_t bytes);  // after a socket read into input_
  // After the socket write of in_flight_: the next write may start.
  void Sent(boost::beast::error_code ec);
  Step Classify(int result, size_t bytes);
  // A socket read's error as asio's stream reports it: an end of stream without the
  // server's close_notify is stream_truncated.
  boost::beast::error_code AfterSocketError(boost::beast::error_code ec) const;

  static BIO_METHOD* Method();
  static int BioRead(BIO* bio, char* data, size_t size, size_t* read);
  static int BioWrite(BIO* bio, const char* data, size_t size, size_t* written);
  static long BioControl(BIO* bio, int command, long number, void* pointer);

  boost::beast::tcp_stream next_;
  // Before ssl_, so that they outlive it: its BIO points at them.
  boost::beast::flat_buffer input_;      // records read from the socket, for OpenSSL
  boost::beast::flat_buffer output_;     // records from OpenSSL, for the socket
  boost::beast::flat_buffer in_flight_;  // records being written to the socket
  std::unique_ptr<SSL, decltype(&SSL_free)> ssl_;
  GrowingReadSize read_size_;  // reset when the buffers are released
  bool reading_ = false;  // an operation's socket read is in flight
  bool sending_ = false;  // an operation's socket write (of in_flight_) is in flight
  // A socket write failed: records were lost, so nothing more may be sent.
  boost::beast::error_code send_error_;
  // Cancelled when a socket write ends, to wake an operation waiting with records.
  boost::asio::steady_timer send_turn_;
};

}  // namespace egress::transport

#endif  // EGRESS_SERVICE_TRANSPORT_IO_TLS_STREAM_H_
