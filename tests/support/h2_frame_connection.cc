#include "tests/support/h2_frame_connection.h"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/time/clock.h"

namespace egress::testing {
namespace {

uint32_t BigEndian32(const std::string& bytes, size_t at) {
  uint32_t value = 0;
  if (bytes.size() >= at + 4) std::memcpy(&value, bytes.data() + at, 4);
  return ntohl(value);
}

}  // namespace

std::string BigEndian32Bytes(uint32_t value) {
  const uint32_t network = htonl(value);
  return std::string(reinterpret_cast<const char*>(&network), 4);
}

std::string H2Frame(uint8_t type, uint8_t flags, int32_t stream_id, const std::string& payload) {
  const uint32_t length = static_cast<uint32_t>(payload.size());
  std::string frame = {static_cast<char>(length >> 16), static_cast<char>(length >> 8),
                       static_cast<char>(length), static_cast<char>(type),
                       static_cast<char>(flags)};
  return frame + BigEndian32Bytes(static_cast<uint32_t>(stream_id)) + payload;
}

std::string SettingsFrame() { return H2Frame(NGHTTP2_SETTINGS, NGHTTP2_FLAG_NONE, 0, ""); }
std::string SettingsAckFrame() { return H2Frame(NGHTTP2_SETTINGS, NGHTTP2_FLAG_ACK, 0, ""); }
std::string PingFrame() { return H2Frame(NGHTTP2_PING, NGHTTP2_FLAG_NONE, 0, std::string(8, 'p')); }
std::string RstStreamFrame(int32_t stream_id) {
  return H2Frame(NGHTTP2_RST_STREAM, NGHTTP2_FLAG_NONE, stream_id,
                 BigEndian32Bytes(NGHTTP2_CANCEL));
}

uint32_t ReadFrame::ErrorCode() const {
  return BigEndian32(payload, type == NGHTTP2_GOAWAY ? 4 : 0);
}
uint32_t ReadFrame::LastStreamId() const { return BigEndian32(payload, 0) & 0x7fffffff; }
std::string ReadFrame::DebugData() const { return payload.size() > 8 ? payload.substr(8) : ""; }

bool IsSettingsAck(const ReadFrame& frame) {
  return frame.type == NGHTTP2_SETTINGS && (frame.flags & NGHTTP2_FLAG_ACK);
}

const ReadFrame* FirstGoaway(const std::vector<ReadFrame>& frames) {
  for (const auto& frame : frames) {
    if (frame.type == NGHTTP2_GOAWAY) return &frame;
  }
  return nullptr;
}

H2FrameConnection::H2FrameConnection(int port, int receive_buffer, uint32_t source)
    : fd_(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
  if (receive_buffer > 0) {
    setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof(receive_buffer));
  }
  sockaddr_in from{};
  from.sin_family = AF_INET;
  from.sin_addr.s_addr = htonl(source);
  bind(fd_, reinterpret_cast<sockaddr*>(&from), sizeof(from));
  timeval ten_seconds = {10, 0};  // a send the server never takes fails, not hangs
  setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &ten_seconds, sizeof(ten_seconds));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  nghttp2_hd_deflate_new(&deflater_, 4096);
  nghttp2_hd_inflate_new(&inflater_);
}

H2FrameConnection::~H2FrameConnection() {
  nghttp2_hd_deflate_del(deflater_);
  nghttp2_hd_inflate_del(inflater_);
  close(fd_);
}

bool H2FrameConnection::Send(const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

bool H2FrameConnection::SendUnlessStalled(const std::string& bytes, absl::Duration stall,
                                          size_t* sent) {
  size_t at = 0;
  while (at < bytes.size()) {
    const ssize_t n = send(fd_, bytes.data() + at, bytes.size() - at, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      at += static_cast<size_t>(n);
      *sent += static_cast<size_t>(n);
      continue;
    }
    pollfd writable{fd_, POLLOUT, 0};
    if (poll(&writable, 1, static_cast<int>(absl::ToInt64Milliseconds(stall))) <= 0) return false;
  }
  return true;
}

bool H2FrameConnection::Greet() {
  ++settings_acknowledged_in_advance_;
  return Send(std::string(kClientPreface) + SettingsFrame() + SettingsAckFrame());
}

std::string H2FrameConnection::RequestBlock(const RawHeaders& extra, const std::string& path) {
  RawHeaders fields = {{":method", "POST"},
                       {":scheme", "http"},
                       {":authority", "127.0.0.1"},
                       {":path", path},
                       {"content-type", "application/grpc"},
                       {"te", "trailers"}};
  fields.insert(fields.end(), extra.begin(), extra.end());
  std::vector<nghttp2_nv> nv;
  for (auto& [name, value] : fields) {
    nv.push_back({reinterpret_cast<uint8_t*>(name.data()), reinterpret_cast<uint8_t*>(value.data()),
                  name.size(), value.size(), NGHTTP2_NV_FLAG_NONE});
  }
  std::string block(nghttp2_hd_deflate_bound(deflater_, nv.data(), nv.size()), '\0');
  const ssize_t size = nghttp2_hd_deflate_hd(deflater_, reinterpret_cast<uint8_t*>(block.data()),
                                             block.size(), nv.data(), nv.size());
  block.resize(size > 0 ? static_cast<size_t>(size) : 0);
  return block;
}

bool H2FrameConnection::OpenStream(int32_t stream_id, const std::string& path) {
  return Send(
      H2Frame(NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS, stream_id, RequestBlock({}, path)));
}

std::vector<ReadFrame> H2FrameConnection::Read(absl::Duration wait,
                                               const std::function<bool(const ReadFrame&)>& done) {
  std::vector<ReadFrame> frames;
  const absl::Time give_up = absl::Now() + wait;
  while (true) {
    while (input_.size() >= 9) {
      const size_t length =
          (uint8_t(input_[0]) << 16) | (uint8_t(input_[1]) << 8) | uint8_t(input_[2]);
      if (input_.size() < 9 + length) break;
      ReadFrame frame;
      frame.type = static_cast<uint8_t>(input_[3]);
      frame.flags = static_cast<uint8_t>(input_[4]);
      frame.stream_id = static_cast<int32_t>(BigEndian32(input_, 5) & 0x7fffffff);
      frame.payload = input_.substr(9, length);
      input_.erase(0, 9 + length);
      if (frame.type == NGHTTP2_GOAWAY) ++goaways_;
      frames.push_back(std::move(frame));
      if (done && done(frames.back())) return frames;
    }
    const absl::Duration left = give_up - absl::Now();
    if (closed_ || left <= absl::ZeroDuration()) return frames;
    pollfd readable{fd_, POLLIN, 0};
    const int64_t wait_ms = std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 1000);
    if (poll(&readable, 1, static_cast<int>(wait_ms)) <= 0) continue;
    char in[65536];
    const ssize_t got = recv(fd_, in, sizeof(in), 0);
    if (got <= 0) {
      closed_ = true;
    } else {
      input_.append(in, static_cast<size_t>(got));
    }
  }
}

std::optional<ReadFrame> H2FrameConnection::Next(uint8_t type, absl::Duration wait) {
  auto frames = Read(wait, [&](const ReadFrame& frame) {
    if (frame.type == NGHTTP2_SETTINGS && !(frame.flags & NGHTTP2_FLAG_ACK)) {
      if (settings_acknowledged_in_advance_ > 0) {
        --settings_acknowledged_in_advance_;
      } else {
        Send(SettingsAckFrame());
      }
    }
    if (ack_pings_ && frame.type == NGHTTP2_PING && !(frame.flags & NGHTTP2_FLAG_ACK)) {
      Send(H2Frame(NGHTTP2_PING, NGHTTP2_FLAG_ACK, 0, frame.payload));
    }
    return frame.type == type;
  });
  if (frames.empty() || frames.back().type != type) return std::nullopt;
  return std::move(frames.back());
}

bool H2FrameConnection::Closes(absl::Duration wait) {
  Read(wait);
  return closed_;
}

RawHeaders H2FrameConnection::Decode(const std::string& block) {
  RawHeaders fields;
  auto* in = reinterpret_cast<const uint8_t*>(block.data());
  size_t left = block.size();
  while (true) {
    nghttp2_nv nv;
    int flags = 0;
    const ssize_t used = nghttp2_hd_inflate_hd2(inflater_, &nv, &flags, in, left, 1);
    if (used < 0) break;
    in += used;
    left -= static_cast<size_t>(used);
    if (flags & NGHTTP2_HD_INFLATE_EMIT) {
      fields.emplace_back(std::string(reinterpret_cast<const char*>(nv.name), nv.namelen),
                          std::string(reinterpret_cast<const char*>(nv.value), nv.valuelen));
    }
    if (flags & NGHTTP2_HD_INFLATE_FINAL) {
      nghttp2_hd_inflate_end_headers(inflater_);
      break;
    }
    if (used == 0 && !(flags & NGHTTP2_HD_INFLATE_EMIT)) break;
  }
  return fields;
}

}  // namespace egress::testing
