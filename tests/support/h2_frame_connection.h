#ifndef EGRESS_TESTS_SUPPORT_H2_FRAME_CONNECTION_H_
#define EGRESS_TESTS_SUPPORT_H2_FRAME_CONNECTION_H_

// An HTTP/2 caller written and read frame by frame by the test's thread: what no client
// library lets a test send (a 101st stream, a flood, a preface never finished, a stream
// opened after the server's final GOAWAY) and every frame the server answers with.

#include <netinet/in.h>
#include <nghttp2/nghttp2.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "tests/support/raw_grpc_call.h"

namespace egress::testing {

inline constexpr char kClientPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

// `value` as 4 bytes, most significant first (HTTP/2's byte order).
std::string BigEndian32Bytes(uint32_t value);
// One frame's bytes.
std::string H2Frame(uint8_t type, uint8_t flags, int32_t stream_id, const std::string& payload);
std::string SettingsFrame();  // empty
std::string SettingsAckFrame();
std::string PingFrame();                        // 8 bytes of 'p'
std::string RstStreamFrame(int32_t stream_id);  // CANCEL

// One frame as the server sent it.
struct ReadFrame {
  uint8_t type = 0;
  uint8_t flags = 0;
  int32_t stream_id = 0;
  std::string payload;
  // A GOAWAY's or RST_STREAM's error code (0 when the payload is too short for one: check
  // its size where 0 is the answer a test expects).
  uint32_t ErrorCode() const;
  // A GOAWAY's last stream id (without the reserved bit).
  uint32_t LastStreamId() const;
  // A GOAWAY's debug data.
  std::string DebugData() const;
};

// The server's acknowledgement of the caller's SETTINGS: it has read the client preface.
bool IsSettingsAck(const ReadFrame& frame);
// The first GOAWAY among `frames`, if any.
const ReadFrame* FirstGoaway(const std::vector<ReadFrame>& frames);

// One caller connection to 127.0.0.1, with an HPACK encoder and decoder of its own (the
// header blocks of one connection share its tables).
class H2FrameConnection {
 public:
  // Connects to 127.0.0.1:port from `source` (an address of the loopback's 127/8);
  // `receive_buffer` (bytes, when not 0) is set before the connection is made: a caller
  // that reads nothing holds little. Sends nothing.
  explicit H2FrameConnection(int port, int receive_buffer = 0, uint32_t source = INADDR_LOOPBACK);
  ~H2FrameConnection();
  H2FrameConnection(const H2FrameConnection&) = delete;
  H2FrameConnection& operator=(const H2FrameConnection&) = delete;

  bool connected() const { return connected_; }
  // The server closed (or reset) the connection.
  bool closed() const { return closed_; }
  // The GOAWAY frames read so far.
  int goaways() const { return goaways_; }

  // Writes all of `bytes`: false once the server has closed the connection.
  bool Send(const std::string& bytes);
  // Writes `bytes`, waiting at most `stall` at a time for the socket to take more: false
  // once it took nothing for that long (the server reads no more), with the bytes it took
  // added to `sent`.
  bool SendUnlessStalled(const std::string& bytes, absl::Duration stall, size_t* sent);
  // The preface, an empty SETTINGS and the acknowledgement of the server's SETTINGS in
  // advance (it applies before the caller's next bytes are read), for a caller that
  // reads nothing. Next does not acknowledge that SETTINGS again.
  bool Greet();

  // A request's header block (POST `path`, gRPC's content-type and te) plus `extra`
  // fields, encoded with this connection's table: send it before encoding the next.
  std::string RequestBlock(const RawHeaders& extra = {},
                           const std::string& path = "/egress.v1.Egress/Fetch");
  // HEADERS for `path` on `stream_id`, the request left open (no END_STREAM).
  bool OpenStream(int32_t stream_id, const std::string& path);

  // The frames the server sends until `done` holds for one of them, or the connection
  // ends (closed() then holds), or `wait` passes. Frames after the one `done` took stay
  // for the next read.
  std::vector<ReadFrame> Read(absl::Duration wait,
                              const std::function<bool(const ReadFrame&)>& done = {});
  // The next frame of `type`, acknowledging the server's SETTINGS and (unless
  // set_ack_pings(false)) its PINGs on the way; nullopt once the connection ends or
  // `wait` has passed.
  std::optional<ReadFrame> Next(uint8_t type, absl::Duration wait);
  void set_ack_pings(bool ack) { ack_pings_ = ack; }
  // Whether the server closes the connection within `wait` (whatever it sends first).
  bool Closes(absl::Duration wait);

  // A header block the server sent (one HEADERS frame's payload), decoded with this
  // connection's table.
  RawHeaders Decode(const std::string& block);

 private:
  const int fd_;
  bool connected_ = false;
  bool closed_ = false;
  bool ack_pings_ = true;
  int settings_acknowledged_in_advance_ = 0;
  int goaways_ = 0;
  std::string input_;
  nghttp2_hd_deflater* deflater_ = nullptr;
  nghttp2_hd_inflater* inflater_ = nullptr;
};

}  // namespace egress::testing

#endif  // EGRESS_TESTS_SUPPORT_H2_FRAME_CONNECTION_H_
