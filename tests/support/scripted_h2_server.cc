#include "tests/support/scripted_h2_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <stdexcept>

namespace egress::testing {
namespace {

constexpr char kClientPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
// Frames a script reads are at most this large (the client never sends more than
// 16 KiB of payload, the default SETTINGS_MAX_FRAME_SIZE).
constexpr uint32_t kMaxFrameBytes = 1 << 24;

// An HPACK integer with an N-bit prefix (RFC 7541 5.1), the prefix's other bits `first`.
std::string HpackInteger(uint8_t first, int prefix_bits, size_t value) {
  const size_t max_prefix = (1u << prefix_bits) - 1;
  std::string out;
  if (value < max_prefix) {
    out.push_back(static_cast<char>(first | value));
    return out;
  }
  out.push_back(static_cast<char>(first | max_prefix));
  value -= max_prefix;
  while (value >= 128) {
    out.push_back(static_cast<char>(0x80 | (value & 0x7f)));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
  return out;
}

}  // namespace

H2Peer::H2Peer(int fd) : fd_(fd) {
  timeval timeout{10, 0};
  setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  const int on = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
  if (nghttp2_hd_inflate_new(&inflater_) != 0) throw std::bad_alloc();
}

H2Peer::~H2Peer() { nghttp2_hd_inflate_del(inflater_); }

bool H2Peer::ReadExactly(char* data, size_t size) {
  while (size > 0) {
    const ssize_t got = ::recv(fd_, data, size, 0);
    if (got <= 0) return false;
    data += got;
    size -= static_cast<size_t>(got);
  }
  return true;
}

bool H2Peer::Write(const std::string& bytes) {
  const char* data = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    const ssize_t sent = ::send(fd_, data, left, MSG_NOSIGNAL);
    if (sent <= 0) return false;
    data += sent;
    left -= static_cast<size_t>(sent);
  }
  return true;
}

std::string H2Peer::Uint32(uint32_t value) {
  const uint32_t big_endian = htonl(value);
  return std::string(reinterpret_cast<const char*>(&big_endian), 4);
}

std::string H2Peer::Frame(uint8_t type, uint8_t flags, int32_t stream_id,
                          const std::string& payload) {
  const uint32_t length = static_cast<uint32_t>(payload.size());
  std::string frame;
  frame.reserve(9 + payload.size());
  frame.push_back(static_cast<char>(length >> 16));
  frame.push_back(static_cast<char>(length >> 8));
  frame.push_back(static_cast<char>(length));
  frame.push_back(static_cast<char>(type));
  frame.push_back(static_cast<char>(flags));
  frame += Uint32(static_cast<uint32_t>(stream_id) & 0x7fffffff);
  frame += payload;
  return frame;
}

std::string H2Peer::Settings(const std::vector<std::pair<uint16_t, uint32_t>>& entries) {
  std::string payload;
  for (const auto& [id, value] : entries) {
    payload.push_back(static_cast<char>(id >> 8));
    payload.push_back(static_cast<char>(id));
    payload += Uint32(value);
  }
  return Frame(h2::kSettings, 0, 0, payload);
}

std::string H2Peer::HeaderBlock(const std::vector<std::pair<std::string, std::string>>& fields) {
  std::string block;
  for (const auto& [name, value] : fields) {
    block += HpackInteger(0x00, 4, 0);  // literal without indexing, new name
    block += HpackInteger(0x00, 7, name.size()) + name;
    block += HpackInteger(0x00, 7, value.size()) + value;
  }
  return block;
}

bool H2Peer::WriteFrame(uint8_t type, uint8_t flags, int32_t stream_id,
                        const std::string& payload) {
  return Write(Frame(type, flags, stream_id, payload));
}

bool H2Peer::Handshake(const std::vector<std::pair<uint16_t, uint32_t>>& settings) {
  char preface[sizeof(kClientPreface) - 1];
  if (!ReadExactly(preface, sizeof(preface)) ||
      std::memcmp(preface, kClientPreface, sizeof(preface)) != 0) {
    return false;
  }
  const std::optional<H2Frame> client_settings = ReadFrame();
  if (!client_settings || client_settings->type != h2::kSettings) return false;
  return Write(Settings(settings) + Frame(h2::kSettings, h2::kAck, 0, ""));
}

void H2Peer::ReadUntilClosed() {
  while (ReadFrame()) {
  }
}

std::optional<H2Frame> H2Peer::ReadFrame() {
  unsigned char header[9];
  if (!ReadExactly(reinterpret_cast<char*>(header), sizeof(header))) return std::nullopt;
  const uint32_t length = (header[0] << 16) | (header[1] << 8) | header[2];
  if (length > kMaxFrameBytes) return std::nullopt;
  H2Frame frame;
  frame.type = header[3];
  frame.flags = header[4];
  frame.stream_id = static_cast<int32_t>(
      ((header[5] << 24) | (header[6] << 16) | (header[7] << 8) | header[8]) & 0x7fffffff);
  frame.payload.resize(length);
  if (!ReadExactly(frame.payload.data(), length)) return std::nullopt;
  Count(frame);
  return frame;
}

void H2Peer::Count(const H2Frame& frame) {
  if (frame.type == h2::kData) data_bytes_[frame.stream_id] += frame.payload.size();
  if ((frame.type == h2::kData || frame.type == h2::kHeaders) && (frame.flags & h2::kEndStream)) {
    ended_[frame.stream_id] = true;
  }
}

uint64_t H2Peer::data_bytes(int32_t stream_id) const {
  const auto it = data_bytes_.find(stream_id);
  return it == data_bytes_.end() ? 0 : it->second;
}

std::optional<H2Request> H2Peer::ReadRequest() {
  for (;;) {
    std::optional<H2Frame> frame = ReadFrame();
    if (!frame) return std::nullopt;
    if (frame->type != h2::kHeaders) continue;
    H2Request request;
    request.stream_id = frame->stream_id;
    request.end_stream = frame->flags & h2::kEndStream;
    std::string block = frame->payload;  // egress sends neither padding nor priority
    while (!(frame->flags & h2::kEndHeaders)) {
      frame = ReadFrame();
      if (!frame || frame->type != h2::kContinuation) return std::nullopt;
      block += frame->payload;
    }
    const auto* in = reinterpret_cast<const uint8_t*>(block.data());
    size_t left = block.size();
    for (;;) {
      nghttp2_nv field;
      int flags = 0;
      const ssize_t used = nghttp2_hd_inflate_hd2(inflater_, &field, &flags, in, left, 1);
      if (used < 0) return std::nullopt;
      in += used;
      left -= static_cast<size_t>(used);
      if (flags & NGHTTP2_HD_INFLATE_EMIT) {
        std::string name(reinterpret_cast<const char*>(field.name), field.namelen);
        std::string value(reinterpret_cast<const char*>(field.value), field.valuelen);
        request.headers[name] = value;
        request.fields.emplace_back(std::move(name), std::move(value));
      }
      if (flags & NGHTTP2_HD_INFLATE_FINAL) break;
      if (used == 0 && left == 0) break;
    }
    nghttp2_hd_inflate_end_headers(inflater_);
    return request;
  }
}

std::optional<std::string> H2Peer::ReadBody(int32_t stream_id) {
  std::string body;
  while (!ended_[stream_id]) {
    std::optional<H2Frame> frame = ReadFrame();
    if (!frame) return std::nullopt;
    if (frame->type == h2::kData && frame->stream_id == stream_id) body += frame->payload;
  }
  return body;
}

bool H2Peer::WriteHead(int32_t stream_id, const std::string& status, uint8_t flags,
                       const std::vector<std::pair<std::string, std::string>>& fields) {
  std::vector<std::pair<std::string, std::string>> all = {{":status", status}};
  all.insert(all.end(), fields.begin(), fields.end());
  return WriteFrame(h2::kHeaders, h2::kEndHeaders | flags, stream_id, HeaderBlock(all));
}

bool H2Peer::Respond(int32_t stream_id, int status, const std::string& body,
                     const std::vector<std::pair<std::string, std::string>>& fields) {
  if (!WriteHead(stream_id, std::to_string(status), body.empty() ? h2::kEndStream : 0, fields)) {
    return false;
  }
  constexpr size_t kPiece = 16 * 1024;
  for (size_t offset = 0; offset < body.size(); offset += kPiece) {
    const bool last = offset + kPiece >= body.size();
    if (!WriteFrame(h2::kData, last ? h2::kEndStream : 0, stream_id, body.substr(offset, kPiece))) {
      return false;
    }
  }
  return true;
}

bool H2Peer::Goaway(int32_t last_stream_id, uint32_t error_code, const std::string& debug) {
  return WriteFrame(h2::kGoaway, 0, 0,
                    Uint32(static_cast<uint32_t>(last_stream_id)) + Uint32(error_code) + debug);
}

void H2Peer::Close() { ::shutdown(fd_, SHUT_RDWR); }

ScriptedH2Server::ScriptedH2Server(Script script, int receive_buffer_bytes)
    : script_(std::move(script)) {
  listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
  const int on = 1;
  setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
  if (receive_buffer_bytes > 0) {  // inherited by accepted sockets; set before listen
    setsockopt(listener_, SOL_SOCKET, SO_RCVBUF, &receive_buffer_bytes,
               sizeof(receive_buffer_bytes));
  }
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::listen(listener_, 64) != 0 ||
      ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    throw std::runtime_error("ScriptedH2Server: cannot listen on 127.0.0.1");
  }
  port_ = ntohs(address.sin_port);
  acceptor_ = std::thread([this] { Accept(); });
}

ScriptedH2Server::~ScriptedH2Server() {
  ::shutdown(listener_, SHUT_RDWR);
  acceptor_.join();
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);  // unblocks the scripts' reads
  }
  for (auto& thread : threads_) thread.join();
  for (int fd : fds_) ::close(fd);
  ::close(listener_);
}

void ScriptedH2Server::Accept() {
  for (;;) {
    const int fd = ::accept(listener_, nullptr, nullptr);
    if (fd < 0) return;  // shut down
    ++accepted_;
    ++running_;
    std::lock_guard<std::mutex> lock(mu_);
    fds_.push_back(fd);
    threads_.emplace_back([this, fd] {
      {
        H2Peer peer(fd);
        script_(peer);
        peer.Close();  // the script is over: the client sees the connection end
      }
      --running_;
    });
  }
}

bool ScriptedH2Server::WaitForScripts() {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (running_ > 0 && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return running_ == 0;
}

}  // namespace egress::testing
