#ifndef EGRESS_TESTS_SUPPORT_RAW_GRPC_CALL_H_
#define EGRESS_TESTS_SUPPORT_RAW_GRPC_CALL_H_

// gRPC calls over an HTTP/2 connection of a test's own (cleartext, prior knowledge), sent
// with the headers a test gives and nothing else: no deadline of the client's own, no
// RST_STREAM, a flow-control window the test opens when it chooses, a request left
// unfinished: what a real gRPC client would not let a test do.

#include <nghttp2/nghttp2.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace egress::testing {

using RawHeaders = std::vector<std::pair<std::string, std::string>>;

struct RawGrpcAnswer {
  RawHeaders headers;   // the first HEADERS frame
  RawHeaders trailers;  // empty for Trailers-Only
  std::string data;     // the DATA bytes, length prefixes included
  // How the stream ended: NO_ERROR (0), or the code of the server's RST_STREAM.
  uint32_t error_code = 0;
  // A field of the trailers (or of the headers, for Trailers-Only); empty when absent.
  std::string Field(const std::string& name) const;
};

// A TCP connection to 127.0.0.1:port: its descriptor, or -1 when refused.
int ConnectToLoopback(int port);

// One connection to 127.0.0.1:port, pumped by the test's thread.
class RawGrpcConnection {
 public:
  // Connects and announces `initial_window` as SETTINGS_INITIAL_WINDOW_SIZE: at 0 the
  // server can send HEADERS but no DATA until OpenWindow.
  static absl::StatusOr<std::unique_ptr<RawGrpcConnection>> Open(int port,
                                                                 uint32_t initial_window = 65535);
  ~RawGrpcConnection();
  RawGrpcConnection(const RawGrpcConnection&) = delete;
  RawGrpcConnection& operator=(const RawGrpcConnection&) = delete;

  // Starts a call: POSTs `framed` (length-prefixed messages, or part of one) on `path`
  // with `extra` headers besides the required ones, ending the request unless
  // `end_request` is false. The stream's id; nothing is sent before Pump.
  int32_t Start(const std::string& path, const std::string& framed, const RawHeaders& extra,
                bool end_request = true);
  // Sends what is queued and reads what comes until `done` holds (true) or `wait` passed
  // or the connection ended (false).
  bool Pump(const std::function<bool()>& done, absl::Duration wait);
  // Announces a window of 65535 bytes for every stream: the server may send DATA again.
  void OpenWindow();

  bool head_seen(int32_t stream_id) const { return calls_.at(stream_id)->head_seen; }
  bool closed(int32_t stream_id) const { return calls_.at(stream_id)->closed; }
  // The request's bytes are all on the wire.
  bool request_sent(int32_t stream_id) const { return calls_.at(stream_id)->body.empty(); }
  // The request's bytes not on the wire yet (the server's flow control holds them back).
  size_t request_left(int32_t stream_id) const { return calls_.at(stream_id)->body.size(); }
  const RawGrpcAnswer& answer(int32_t stream_id) const { return calls_.at(stream_id)->answer; }
  // How many GOAWAY frames came, and the last stream id the latest named.
  int goaways() const { return goaways_; }
  int32_t goaway_last_stream_id() const { return goaway_last_stream_id_; }
  // The server closed the connection (or it broke).
  bool ended() const { return broken_; }
  // The stream's answer once it ends, waiting up to `wait`.
  absl::StatusOr<RawGrpcAnswer> Wait(int32_t stream_id, absl::Duration wait);

 private:
  struct Call {
    RawGrpcAnswer answer;
    bool head_seen = false;
    bool closed = false;
    std::string body;  // what is left to send
    bool end_request = true;
  };

  RawGrpcConnection(int fd, int port, uint32_t initial_window);
  Call* Find(int32_t stream_id);
  static int OnHeader(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name,
                      size_t name_size, const uint8_t* value, size_t value_size, uint8_t,
                      void* self);
  static int OnFrame(nghttp2_session*, const nghttp2_frame* frame, void* self);
  static int OnData(nghttp2_session*, uint8_t, int32_t stream_id, const uint8_t* data,
                    size_t size, void* self);
  static int OnClose(nghttp2_session*, int32_t stream_id, uint32_t error_code, void* self);
  static ssize_t ReadBody(nghttp2_session*, int32_t, uint8_t* buffer, size_t length,
                          uint32_t* flags, nghttp2_data_source* source, void*);

  const int fd_;
  const int port_;
  nghttp2_session* session_ = nullptr;
  bool broken_ = false;  // the server closed the connection, or it broke
  int goaways_ = 0;
  int32_t goaway_last_stream_id_ = -1;
  std::map<int32_t, std::unique_ptr<Call>> calls_;  // nghttp2 holds each body's Call
};

// One call on a connection of its own: POSTs `framed` on `path` of 127.0.0.1:port with
// `extra` headers besides the required ones; waits up to `wait` for the stream to end.
absl::StatusOr<RawGrpcAnswer> RawGrpcCall(int port, const std::string& path,
                                          const std::string& framed, const RawHeaders& extra,
                                          absl::Duration wait);

}  // namespace egress::testing

#endif  // EGRESS_TESTS_SUPPORT_RAW_GRPC_CALL_H_
