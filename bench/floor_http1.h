// What the floor benchmarks (issue 15) need of HTTP/1.1 and nothing more: the GET for a
// URL, and a reader of its response that knows Content-Length only. Not a parser for
// anything but the benchmark's own nginx.
#ifndef EGRESS_BENCH_FLOOR_HTTP1_H_
#define EGRESS_BENCH_FLOOR_HTTP1_H_

#include <array>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"

namespace egress::bench {

// A GET for http://ip:port/path (as bench/loopback.py sends it) and where it goes.
struct UpstreamGet {
  boost::asio::ip::tcp::endpoint upstream;
  std::string request;  // the request's bytes

  // Empty for anything else than http:// to an IP literal.
  static std::optional<UpstreamGet> For(absl::string_view url) {
    if (!absl::ConsumePrefix(&url, "http://")) return std::nullopt;
    const size_t slash = url.find('/');
    const absl::string_view authority = url.substr(0, slash);
    const absl::string_view path = slash == absl::string_view::npos ? "/" : url.substr(slash);
    const size_t colon = authority.rfind(':');
    int port = 80;
    if (colon != absl::string_view::npos && !absl::SimpleAtoi(authority.substr(colon + 1), &port)) {
      port = 80;
    }
    boost::system::error_code ec;
    const auto address =
        boost::asio::ip::make_address(std::string(authority.substr(0, colon)), ec);
    if (ec) return std::nullopt;
    return UpstreamGet{{address, static_cast<unsigned short>(port)},
                       absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: ", authority, "\r\n\r\n")};
  }
};

// A response read so far on one connection.
struct ResponseReader {
  std::string bytes;
  size_t head_size = 0;
  size_t content_length = 0;
  int status = 0;

  // Whether `bytes` holds the whole response (then head_size, status, content_length
  // are set); false while more is due. A head without Content-Length has an empty body.
  bool Complete() {
    if (head_size == 0) {
      const size_t end = bytes.find("\r\n\r\n");
      if (end == std::string::npos) return false;
      head_size = end + 4;
      const absl::string_view head(bytes.data(), end);
      if (head.size() < 12 || !absl::SimpleAtoi(head.substr(9, 3), &status)) status = 0;
      const size_t at = absl::AsciiStrToLower(head).find("\r\ncontent-length:");
      content_length = 0;
      if (at != std::string::npos) {
        const size_t value = at + 17;
        const size_t line_end = head.find("\r\n", value);
        if (!absl::SimpleAtoi(head.substr(value, line_end - value), &content_length)) {
          content_length = 0;
        }
      }
    }
    return bytes.size() >= head_size + content_length;
  }

  // Takes the body out, leaving what follows it (nothing, on a keep-alive connection).
  std::string TakeBody() {
    std::string body = bytes.substr(head_size, content_length);
    bytes.erase(0, head_size + content_length);
    head_size = 0;
    return body;
  }
};

// One keep-alive connection to the upstream, used by one fetch at a time.
struct UpstreamConnection {
  explicit UpstreamConnection(boost::asio::io_context& loop) : socket(loop) {}

  // A connection to `address` run by `loop`, or null if it cannot be made. A blocking
  // connect: the benchmarks warm their pools up before they measure.
  static std::unique_ptr<UpstreamConnection> Connect(
      boost::asio::io_context& loop, const boost::asio::ip::tcp::endpoint& address) {
    auto connection = std::make_unique<UpstreamConnection>(loop);
    boost::system::error_code ec;
    connection->socket.connect(address, ec);
    if (ec) return nullptr;
    connection->socket.set_option(boost::asio::ip::tcp::no_delay(true));
    return connection;
  }

  boost::asio::ip::tcp::socket socket;
  ResponseReader reader;
  std::array<char, 16384> scratch;  // one socket read
};

}  // namespace egress::bench

#endif  // EGRESS_BENCH_FLOOR_HTTP1_H_
