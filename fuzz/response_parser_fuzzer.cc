// The HTTP/1.1 response path every connection runs (service/transport/http1/response_parser.h):
// the head read past interim responses, then the body read in pieces, as Connection
// does over a socket. Whatever the upstream sends, the parser never writes past the
// pieces it is lent, and a body it calls complete has exactly its Content-Length
// (none after a HEAD request or in a 204 or 304, whatever Content-Length they carry).
// Input: three control bytes (header limit, HEAD or not, piece and segment sizes), then
// the bytes the upstream sends.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <vector>

#include "boost/asio/buffer.hpp"
#include "boost/beast/core/flat_buffer.hpp"
#include "boost/beast/http.hpp"
#include "service/transport/http1/response_parser.h"

namespace {

namespace http = boost::beast::http;
using egress::transport::ResponseParser;

void Check(bool condition) {
  if (!condition) std::abort();
}

// A SyncReadStream handing out the input in segments, as a socket would.
class InputStream {
 public:
  InputStream(const uint8_t* data, size_t size, size_t segment)
      : data_(data), size_(size), segment_(segment) {}

  template <class MutableBuffers>
  size_t read_some(const MutableBuffers& buffers, boost::system::error_code& ec) {
    if (offset_ == size_) {
      ec = boost::asio::error::eof;
      return 0;
    }
    const size_t n = boost::asio::buffer_copy(
        buffers, boost::asio::buffer(data_ + offset_, std::min(segment_, size_ - offset_)));
    offset_ += n;
    ec = {};
    return n;
  }
  template <class MutableBuffers>
  size_t read_some(const MutableBuffers& buffers) {
    boost::system::error_code ec;
    return read_some(buffers, ec);
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t segment_;
  size_t offset_ = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const uint32_t max_header_bytes = 1024 + data[0] * 64u;
  const bool head_request = data[1] & 1;
  const size_t piece_size = 1 + (data[2] & 0x3f) * 97;
  const size_t segment = 1 + (data[2] >> 6) * 700;
  InputStream stream(data + 3, size - 3, segment);
  boost::beast::flat_buffer buffer;
  std::optional<ResponseParser> parser;
  boost::system::error_code ec;

  for (;;) {  // interim (1xx) responses come before the final one
    egress::transport::ResetResponseParser(parser, max_header_bytes, head_request);
    http::read_header(stream, buffer, *parser, ec);
    if (ec) return 0;
    const unsigned status = parser->get().result_int();
    if (status == 101 || status < 100) return 0;  // Connection refuses these
    if (status < 100 || status >= 200) break;
  }
  const egress::transport::ResponseHead head = egress::transport::HeadOf(*parser);
  Check(head.status_code >= 200 && head.status_code <= 999);
  const bool bodiless = head_request || head.status_code == 204 || head.status_code == 304;
  const auto content_length = parser->content_length();
  egress::transport::UnreadBodyOf(*parser, true);

  // Guard bytes around each lent piece catch a write past its end.
  std::vector<char> piece(piece_size + 16, '\x5a');
  uint64_t body_bytes = 0;
  while (!parser->is_done()) {
    egress::transport::LendBodyBuffer(*parser, piece.data(), piece_size);
    http::read_some(stream, buffer, *parser, ec);
    if (ec == http::error::need_buffer) ec = {};
    if (ec) return 0;
    const size_t filled = egress::transport::BodyBytesFilled(*parser, piece_size);
    Check(filled <= piece_size);
    for (size_t i = piece_size; i < piece.size(); ++i) Check(piece[i] == '\x5a');
    body_bytes += filled;
  }
  if (bodiless) Check(body_bytes == 0);
  if (!bodiless && content_length) Check(body_bytes == *content_length);
  return 0;
}
