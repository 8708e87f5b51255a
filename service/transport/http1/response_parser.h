#ifndef EGRESS_SERVICE_TRANSPORT_HTTP1_RESPONSE_PARSER_H_
#define EGRESS_SERVICE_TRANSPORT_HTTP1_RESPONSE_PARSER_H_

#include <cstddef>
#include <cstdint>
#include <optional>

#include "boost/beast/http.hpp"
#include "service/transport/drain/drain_decision.h"
#include "service/transport/http/request.h"
#include "service/transport/http/response_head.h"

namespace egress::transport {

// How every connection parses responses; shared with the fuzz target
// (fuzz/response_parser_fuzzer.cc) so that it exercises exactly this.
using ResponseParser = boost::beast::http::response_parser<boost::beast::http::buffer_body>;

// A parser for the next response: its header block bounded, its body read in pieces
// whose sizes the callers bound, nothing expected after the head of a HEAD request.
void ResetResponseParser(std::optional<ResponseParser>& parser, uint32_t max_header_bytes,
                         bool head_request);

// Lends the parser `size` bytes at `data` to put the body bytes of the next read in.
void LendBodyBuffer(ResponseParser& parser, char* data, size_t size);
// How many of the `size` bytes lent the last read filled.
size_t BodyBytesFilled(const ResponseParser& parser, size_t size);

// The head of a parsed (final) response.
ResponseHead HeadOf(const ResponseParser& parser);

// The body bytes still to come when the response has a Content-Length; none if chunked
// or read until the connection closes.
std::optional<uint64_t> KnownBodyBytesLeft(const ResponseParser& parser);
// A buffer for the body's next bytes: `at_most`, but no larger than what is left of a
// body of known length, and at least 1 byte.
size_t BodyBufferSize(const ResponseParser& parser, uint64_t at_most);

// What is left of the body, for the drain decision.
UnreadBody UnreadBodyOf(const ResponseParser& parser, bool request_keep_alive);

}  // namespace egress::transport

#endif  // EGRESS_SERVICE_TRANSPORT_HTTP1_RESPONSE_PARSER_H_
