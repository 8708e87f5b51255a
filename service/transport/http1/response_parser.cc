// gcc 12 at -O1 (the sanitizer builds) warns inside Boost.Beast's content_length(), on
// the empty boost::optional it returns: a false positive in Boost's code, which this file
// is the one to instantiate. The pragma must come before Beast's headers to cover them.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "service/transport/http1/response_parser.h"

#include <algorithm>
#include <iterator>

#include <string>

namespace egress::transport {

void ResetResponseParser(std::optional<ResponseParser>& parser, uint32_t max_header_bytes,
                         bool head_request) {
  parser.emplace();
  parser->header_limit(max_header_bytes);
  parser->body_limit(boost::none);  // bodies are read in pieces and bounded by callers
  if (head_request) parser->skip(true);
}

void LendBodyBuffer(ResponseParser& parser, char* data, size_t size) {
  auto& body = parser.get().body();
  body.data = data;
  body.size = size;
  body.more = true;
}

size_t BodyBytesFilled(const ResponseParser& parser, size_t size) {
  return size - parser.get().body().size;
}

ResponseHead HeadOf(const ResponseParser& parser) {
  ResponseHead head;
  head.status_code = static_cast<int>(parser.get().result_int());
  head.headers.reserve(std::distance(parser.get().begin(), parser.get().end()));
  for (const auto& field : parser.get()) {
    head.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  }
  return head;
}

std::optional<uint64_t> KnownBodyBytesLeft(const ResponseParser& parser) {
  if (const auto remaining = parser.content_length_remaining()) return *remaining;
  return std::nullopt;
}

size_t BodyBufferSize(const ResponseParser& parser, uint64_t at_most) {
  uint64_t size = std::max<uint64_t>(at_most, 1);
  if (const auto remaining = KnownBodyBytesLeft(parser)) {
    size = std::min<uint64_t>(size, std::max<uint64_t>(*remaining, 1));
  }
  return static_cast<size_t>(size);
}

UnreadBody UnreadBodyOf(const ResponseParser& parser, bool request_keep_alive) {
  UnreadBody unread;
  unread.keep_alive = request_keep_alive && parser.keep_alive();
  unread.remaining_length = KnownBodyBytesLeft(parser);
  return unread;
}

}  // namespace egress::transport
