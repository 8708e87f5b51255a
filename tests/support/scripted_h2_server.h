#ifndef EGRESS_TESTS_SUPPORT_SCRIPTED_H2_SERVER_H_
#define EGRESS_TESTS_SUPPORT_SCRIPTED_H2_SERVER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

struct nghttp2_hd_inflater;

namespace egress::testing {

// One HTTP/2 frame as it is on the wire (RFC 9113 4.1).
struct H2Frame {
  uint8_t type = 0;
  uint8_t flags = 0;
  int32_t stream_id = 0;
  std::string payload;
};

// Frame types and flags, as RFC 9113 numbers them.
namespace h2 {
inline constexpr uint8_t kData = 0x0, kHeaders = 0x1, kRstStream = 0x3, kSettings = 0x4,
                         kPing = 0x6, kGoaway = 0x7, kWindowUpdate = 0x8,
                         kContinuation = 0x9;
inline constexpr uint8_t kEndStream = 0x1, kAck = 0x1, kEndHeaders = 0x4;
inline constexpr uint16_t kSettingsMaxConcurrentStreams = 0x3,
                          kSettingsInitialWindowSize = 0x4, kSettingsMaxFrameSize = 0x5;
inline constexpr uint32_t kNoError = 0x0, kRefusedStream = 0x7;
}  // namespace h2

// A request as the server decoded it.
struct H2Request {
  int32_t stream_id = 0;
  std::map<std::string, std::string> headers;  // pseudo-headers too; the last of a name
  std::vector<std::pair<std::string, std::string>> fields;  // in order, as sent
  bool end_stream = false;  // no body follows
};

// One accepted connection, for a script to speak raw HTTP/2 on: frames are read and
// written as bytes, so that a script can break any rule. Blocking, with 10 s timeouts.
class H2Peer {
 public:
  explicit H2Peer(int fd);
  ~H2Peer();
  H2Peer(const H2Peer&) = delete;
  H2Peer& operator=(const H2Peer&) = delete;

  // Reads the client's preface and SETTINGS, sends `settings` and acknowledges the
  // client's. False if the client did not start HTTP/2.
  bool Handshake(const std::vector<std::pair<uint16_t, uint32_t>>& settings = {});
  // The next frame; none when the connection ended or timed out.
  std::optional<H2Frame> ReadFrame();
  // Reads frames until the client closes the connection (or a read times out).
  void ReadUntilClosed();
  // Reads frames until a request's HEADERS (decoding its block); what comes between
  // (SETTINGS ACK, WINDOW_UPDATE, DATA of other streams) is counted in data_bytes().
  std::optional<H2Request> ReadRequest();
  // Reads frames until the given stream's body has ended; its bytes.
  std::optional<std::string> ReadBody(int32_t stream_id);
  // DATA bytes received per stream, so far.
  uint64_t data_bytes(int32_t stream_id) const;

  bool Write(const std::string& bytes);
  bool WriteFrame(uint8_t type, uint8_t flags, int32_t stream_id, const std::string& payload);
  // A response head: HEADERS with END_HEADERS (and `flags`), ":status" and `fields`.
  bool WriteHead(int32_t stream_id, const std::string& status, uint8_t flags = 0,
                 const std::vector<std::pair<std::string, std::string>>& fields = {});
  // HEADERS with `fields` (":status" first), then the body in DATA frames of 16 KiB, the
  // last with END_STREAM.
  bool Respond(int32_t stream_id, int status, const std::string& body,
               const std::vector<std::pair<std::string, std::string>>& fields = {});
  bool Goaway(int32_t last_stream_id, uint32_t error_code, const std::string& debug = "");
  // Closes the connection (the client sees EOF).
  void Close();
  int fd() const { return fd_; }

  // Frames as bytes.
  static std::string Frame(uint8_t type, uint8_t flags, int32_t stream_id,
                           const std::string& payload);
  static std::string Settings(const std::vector<std::pair<uint16_t, uint32_t>>& entries);
  // An HPACK header block of literal fields (no indexing, no Huffman coding).
  static std::string HeaderBlock(const std::vector<std::pair<std::string, std::string>>& fields);
  static std::string Uint32(uint32_t value);

 private:
  bool ReadExactly(char* data, size_t size);
  void Count(const H2Frame& frame);

  int fd_;
  nghttp2_hd_inflater* inflater_ = nullptr;
  std::map<int32_t, uint64_t> data_bytes_;
  std::map<int32_t, bool> ended_;
};

// An HTTP/2 server on 127.0.0.1 that runs a script on each connection it accepts, on a
// thread of its own: for what no real server will do (GOAWAY mid-load, floods, a window
// that never opens, a server that never reads).
class ScriptedH2Server {
 public:
  using Script = std::function<void(H2Peer&)>;
  // receive_buffer_bytes: the accepted sockets' SO_RCVBUF (0: the kernel's), small to
  // make a client's writes stall soon against a script that does not read.
  explicit ScriptedH2Server(Script script, int receive_buffer_bytes = 0);
  ~ScriptedH2Server();
  ScriptedH2Server(const ScriptedH2Server&) = delete;
  ScriptedH2Server& operator=(const ScriptedH2Server&) = delete;

  int port() const { return port_; }
  int accepted() const { return accepted_; }
  // Waits (up to 10 s) until every script has returned; false if one has not.
  bool WaitForScripts();

 private:
  void Accept();

  const Script script_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<int> accepted_{0};
  std::atomic<int> running_{0};
  std::mutex mu_;
  std::vector<int> fds_;  // accepted, shut down on destruction
  std::vector<std::thread> threads_;
  std::thread acceptor_;
};

}  // namespace egress::testing

#endif  // EGRESS_TESTS_SUPPORT_SCRIPTED_H2_SERVER_H_
