#include "tests/support/http_get.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "boost/asio/connect.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"

namespace egress::testing {

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = boost::asio::ip::tcp;

absl::StatusOr<HttpReply> HttpGet(int port, const std::string& target) {
  boost::asio::io_context io;
  beast::tcp_stream stream(io);
  beast::error_code ec;
  stream.expires_after(std::chrono::seconds(10));
  stream.connect(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"),
                               static_cast<uint16_t>(port)),
                 ec);
  if (ec) return absl::UnavailableError(absl::StrCat("connect to port ", port, ": ", ec.message()));
  http::request<http::empty_body> request(http::verb::get, target, 11);
  request.set(http::field::host, absl::StrCat("127.0.0.1:", port));
  http::write(stream, request, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("write: ", ec.message()));
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64 << 20);
  http::read(stream, buffer, parser, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("read: ", ec.message()));
  return HttpReply{static_cast<int>(parser.get().result_int()), parser.get().body()};
}

std::string UrlEncode(const std::string& value) {
  std::string out;
  for (unsigned char c : value) {
    if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += absl::StrFormat("%%%02X", c);
    }
  }
  return out;
}

}  // namespace egress::testing
