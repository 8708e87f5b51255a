// Connection's HTTP/1.1 exchange: the request written, the head read (1xx, 101), the
// body read within its bounds, the one reuse verdict (to become http1/ClientCodec and
// BodyReader, issue 36).
#include "service/transport/pool/connection.h"

#include <algorithm>
#include <array>
#include <mutex>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "boost/asio/dispatch.hpp"
#include "boost/asio/post.hpp"
#include "boost/asio/write.hpp"
#include "service/base/error_reason.h"

namespace egress::transport {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

void Connection::Send(const HttpRequest& request, absl::Duration header_timeout,
                      const ResponseLimits& limits, absl::Time deadline, HeadCallback done) {
  // Serialized here, on the caller's thread, once; MakeRequest has refused what cannot
  // be written, and this is the defence should a request reach here some other way.
  absl::StatusOr<std::string> head = SerializeRequestHead(request);
  if (!head.ok()) {
    observer_.OnTransportException();
    return done(absl::InternalError(absl::StrCat("egress could not write the ", request.method,
                                                 " request for ", request.origin.Key(), ": ",
                                                 head.status().message())),
                false);
  }
  net::dispatch(stream_.get_executor(),
                [self = shared_from_this(), head = *std::move(head), body = request.body,
                 keep_alive = KeepsAlive(request), is_head = request.method == "HEAD",
                 header_timeout, limits, deadline, done = std::move(done)]() mutable {
                  self->request_head_ = std::move(head);
                  self->request_body_ = std::move(body);
                  self->request_keep_alive_ = keep_alive;
                  self->request_is_head_ = is_head;
                  self->deadline_ = deadline;
                  self->limits_ = limits;
                  // Room for a head or trailers at their limit, a chunk line at its own,
                  // and one read beyond: nothing an upstream sends grows it further.
                  self->buffer_.max_size(std::max(limits.max_header_bytes,
                                                  limits.max_chunk_line_bytes) +
                                         size_t{65536});
                  self->interim_responses_ = 0;
                  self->limit_hit_.reset();
                  self->head_done_ = std::move(done);
                  ++self->requests_;
                  self->ExpireAfter(header_timeout);
                  const absl::string_view body_bytes = self->request_body_.view();
                  const std::array<net::const_buffer, 2> wire = {
                      net::buffer(self->request_head_),
                      net::buffer(body_bytes.data(), body_bytes.size())};
                  net::async_write(self->stream_, wire, self->Guarded(&Connection::OnWrite));
                });
}

void Connection::OnWrite(beast::error_code ec, size_t /*bytes_transferred*/) {
  // Sent or not, the request is done with: a connection must not hold a large upload
  // for its lifetime (nor a broken one until it is let go of).
  request_head_.clear();
  request_head_.shrink_to_fit();
  request_body_ = {};
  if (ec) {
    broken_ = true;
    return std::exchange(head_done_, nullptr)(Fail("sending the request to", ec), false);
  }
  ReadHead();
}

void Connection::ReadHead() {
  ResetResponseParser(parser_, limits_.max_header_bytes, request_is_head_);
  // Beast reads max(512, free capacity) bytes, and the buffer is released while the
  // connection idles: without room made here a small response takes three reads.
  buffer_.reserve(std::min(GrowingReadSize::kFirst, buffer_.max_size()));
  http::async_read_header(stream_, buffer_, *parser_, Guarded(&Connection::OnReadHead));
}

void Connection::OnReadHead(beast::error_code ec, size_t /*bytes_transferred*/) {
  if (ec) {
    broken_ = true;
    if (ec == http::error::header_limit) {
      observer_.OnUpstreamLimit(origin_, UpstreamLimit::kResponseHead);
    }
    const bool response_started = parser_->got_some() || buffer_.size() > 0;
    return std::exchange(head_done_, nullptr)(Fail("waiting for the response from", ec),
                                              response_started);
  }
  const unsigned status = parser_->get().result_int();
  if (status == 101) {
    broken_ = true;
    return std::exchange(head_done_, nullptr)(
        WithReason(absl::UnavailableError(absl::StrCat(origin_.Key(),
                                                       " switched protocols (101); egress "
                                                       "carries HTTP/1.1 requests and "
                                                       "responses only")),
                   "UPSTREAM_INVALID_RESPONSE", {{"origin", origin_.Key()}}),
        true);
  }
  if (status < 100) {  // found by fuzz/response_parser_fuzzer.cc: Beast takes 000-099
    broken_ = true;
    return std::exchange(head_done_, nullptr)(
        WithReason(absl::UnavailableError(absl::StrCat("invalid HTTP response from ",
                                                       origin_.Key(), ": status code ", status,
                                                       " is below 100")),
                   "UPSTREAM_INVALID_RESPONSE", {{"origin", origin_.Key()}}),
        true);
  }
  if (status >= 100 && status < 200) {  // interim: the final one follows
    if (++interim_responses_ > limits_.max_interim_responses) {
      broken_ = true;
      observer_.OnUpstreamLimit(origin_, UpstreamLimit::kInterimResponses);
      return std::exchange(head_done_, nullptr)(
          WithReason(absl::UnavailableError(absl::StrCat(
                         "response from ", origin_.Key(), " has more than ",
                         limits_.max_interim_responses,
                         " interim (1xx) responses before its final one "
                         "(transport.max_interim_responses)")),
                     "UPSTREAM_LIMIT_EXCEEDED", {{"origin", origin_.Key()}}),
          true);
    }
    return ReadHead();
  }

  stream_.tcp().expires_never();
  if (parser_->is_done()) ReleaseIdleBuffers();  // a response without a body
  RecordKeepAliveHint();
  std::exchange(head_done_, nullptr)(HeadOf(*parser_), true);
}

void Connection::RecordKeepAliveHint() {
  const auto& fields = parser_->get();
  const auto header = fields.find(http::field::keep_alive);
  if (header == fields.end()) return;
  const auto value = header->value();
  const std::optional<KeepAliveHint> hint =
      ParseKeepAlive(absl::string_view(value.data(), value.size()));
  if (!hint) return;  // malformed: as if not sent
  std::lock_guard<std::mutex> lock(hint_mu_);
  if (!hint_) hint_ = KeepAliveHint{};
  if (hint->timeout) hint_->timeout = hint->timeout;
  if (hint->max) hint_->max = std::min(*hint->max, hint_->max.value_or(*hint->max));
}

void Connection::ReadBody(size_t max_bytes, absl::Time deadline, ReadCallback done) {
  net::dispatch(stream_.get_executor(), [self = shared_from_this(), max_bytes, deadline,
                                         done = std::move(done)]() mutable {
    self->read_done_ = std::move(done);
    self->deadline_ = deadline;
    self->phase_timeout_ = absl::InfiniteDuration();
    if (self->parser_->is_done()) {
      return std::exchange(self->read_done_, nullptr)(std::string());
    }
    // The buffer is zero-filled and handed over with each read: never larger than what
    // is left of a body of known length (most are small; the benchmark saw 64 KiB
    // memsets per 1 KiB fetch).
    self->read_buffer_.resize(BodyBufferSize(*self->parser_, max_bytes));
    self->ReadBodyStep();
  });
}

void Connection::ReadBodyStep() {
  LendBodyBuffer(*parser_, read_buffer_.data(), read_buffer_.size());
  ExpireAfter(absl::InfiniteDuration());
  ReadSomeBounded(
      [self = shared_from_this()](beast::error_code ec) {
        if (ec == http::error::need_buffer) ec = {};  // the caller's buffer is full
        if (ec) {
          self->read_cutoff_.cancel();
          self->broken_ = true;
          return std::exchange(self->read_done_, nullptr)(
              self->Fail("reading the response body from", ec));
        }
        const size_t got = BodyBytesFilled(*self->parser_, self->read_buffer_.size());
        if (got == 0 && !self->parser_->is_done()) return self->ReadBodyStep();
        self->read_cutoff_.cancel();
        self->stream_.tcp().expires_never();
        self->read_buffer_.resize(got);
        std::exchange(self->read_done_, nullptr)(std::exchange(self->read_buffer_, {}));
      });
}

void Connection::ReadSomeBounded(StepCallback done) {
  step_done_ = std::move(done);
  if (buffer_.size() == 0) return ReadMore();
  ParseBuffered(/*after_read=*/false);
}

// The loop of Beast's read_some_op, with ExceededLimit() where it would read more.
void Connection::ParseBuffered(bool after_read) {
  beast::error_code ec;
  buffer_.consume(parser_->put(buffer_.data(), ec));
  if (parser_->is_done()) ReleaseIdleBuffers();  // nothing is read until the next request
  if (ec == http::error::need_more) {
    limit_hit_ = ExceededLimit();
    if (!limit_hit_) return ReadMore();
    observer_.OnUpstreamLimit(origin_, *limit_hit_);
    ec = http::error::buffer_overflow;
  }
  if (after_read) return CompleteStep(ec);
  // Nothing was read: complete later, as Beast does, not inside the caller's call.
  net::post(stream_.get_executor(), [self = shared_from_this(), ec] {
    self->Guard([&] { self->CompleteStep(ec); });
  });
}

void Connection::ReadMore() {
  // Through FetchStream, a small read is a chunk and a wake-up (see GrowingReadSize).
  const size_t size = std::min(read_size_.next(), buffer_.max_size() - buffer_.size());
  // Past the deadline no socket read starts: one of bytes already there completes before
  // the expired timer does, so a body as fast as it is read would run on past it.
  // (What is buffered is still parsed: a body that has all arrived still ends.)
  const beast::error_code refused = size == 0 ? beast::error_code(http::error::buffer_overflow)
                                    : absl::Now() >= deadline_ ? beast::error::timeout
                                                               : beast::error_code();
  if (refused) {  // (size 0 cannot happen within the limits above; the buffer bounds it)
    return net::post(stream_.get_executor(), [self = shared_from_this(), refused] {
      self->Guard([&] { self->CompleteStep(refused); });
    });
  }
  stream_.async_read_some(
      buffer_.prepare(size),
      [self = shared_from_this(), size](beast::error_code ec, size_t bytes_transferred) {
        self->Guard([&] {
          self->buffer_.commit(bytes_transferred);
          self->read_size_.Read(size, bytes_transferred);
          if (!self->step_done_) return;  // OnException ended the operation
          if (ec == net::error::eof) {
            if (!self->parser_->got_some()) return self->CompleteStep(http::error::end_of_stream);
            // A body that ends with the connection (RFC 9112, 6.3) is done; anything else
            // is partial_message. Either way there is nothing more to parse.
            ec = {};
            self->parser_->put_eof(ec);
            if (!ec) self->ReleaseIdleBuffers();
            return self->CompleteStep(ec);
          }
          if (ec) return self->CompleteStep(ec);
          self->ParseBuffered(/*after_read=*/true);
        });
      });
}

void Connection::CompleteStep(beast::error_code ec) {
  // None when OnException ended the operation while a completion was on its way.
  if (auto done = std::exchange(step_done_, nullptr)) done(ec);
}

std::optional<UpstreamLimit> Connection::ExceededLimit() const {
  if (!parser_->is_header_done() || !parser_->chunked()) return std::nullopt;
  // Waiting in a chunked body, the parser holds an unended chunk line, or a last chunk
  // whose trailers have not ended. The CRLF after the previous chunk's data comes first.
  const auto bytes = buffer_.data();
  absl::string_view data(static_cast<const char*>(bytes.data()), bytes.size());
  if (absl::StartsWith(data, "\r\n")) data.remove_prefix(2);
  const size_t eol = data.find("\r\n");
  if (eol == absl::string_view::npos) {
    if (data.size() > limits_.max_chunk_line_bytes) return UpstreamLimit::kChunkLine;
    return std::nullopt;
  }
  if (eol > limits_.max_chunk_line_bytes) return UpstreamLimit::kChunkLine;
  if (data.size() - eol - 2 > limits_.max_header_bytes) return UpstreamLimit::kTrailers;
  return std::nullopt;
}

void Connection::CutReadShortAfter(absl::Duration limit) {
  net::dispatch(stream_.get_executor(), [self = shared_from_this(), limit] {
    if (!self->read_done_) return;  // the read is over
    self->read_cutoff_.expires_after(absl::ToChronoNanoseconds(limit));
    self->read_cutoff_.async_wait([self](beast::error_code ec) {
      if (!ec && self->read_done_) self->CloseOnStrand();  // the read fails, aborted
    });
  });
}

UnreadBody Connection::unread_body() const {
  return UnreadBodyOf(*parser_, request_keep_alive_);
}

std::optional<CloseReason> Connection::ReuseVerdict() const {
  if (closing_) return CloseReason::kCancelled;
  if (broken_ || !parser_) return CloseReason::kError;
  if (!parser_->is_done()) return CloseReason::kUnreadBody;
  // Bytes past the end of the response (a Content-Length shorter than what was sent):
  // the next response on this connection could not be told from them.
  if (buffer_.size() > 0) return CloseReason::kError;
  if (!request_keep_alive_ || !parser_->keep_alive()) return CloseReason::kConnectionClose;
  return std::nullopt;
}

}  // namespace egress::transport
