#include "tests/support/raw_grpc_call.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace egress::testing {
namespace {

nghttp2_nv Field(const std::pair<std::string, std::string>& field) {
  return {reinterpret_cast<uint8_t*>(const_cast<char*>(field.first.data())),
          reinterpret_cast<uint8_t*>(const_cast<char*>(field.second.data())),
          field.first.size(), field.second.size(), NGHTTP2_NV_FLAG_NONE};
}

}  // namespace

std::string RawGrpcAnswer::Field(const std::string& name) const {
  for (const auto* fields : {&trailers, &headers}) {
    for (const auto& [key, value] : *fields) {
      if (key == name) return value;
    }
  }
  return "";
}

int ConnectToLoopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

absl::StatusOr<std::unique_ptr<RawGrpcConnection>> RawGrpcConnection::Open(
    int port, uint32_t initial_window) {
  const int fd = ConnectToLoopback(port);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("connect to port ", port, " failed"));
  return std::unique_ptr<RawGrpcConnection>(new RawGrpcConnection(fd, port, initial_window));
}

RawGrpcConnection::RawGrpcConnection(int fd, int port, uint32_t initial_window)
    : fd_(fd), port_(port) {
  nghttp2_session_callbacks* callbacks;
  nghttp2_session_callbacks_new(&callbacks);
  nghttp2_session_callbacks_set_on_header_callback(callbacks, OnHeader);
  nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, OnFrame);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, OnData);
  nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, OnClose);
  nghttp2_session_client_new(&session_, callbacks, this);
  nghttp2_session_callbacks_del(callbacks);
  const nghttp2_settings_entry window = {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, initial_window};
  nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, &window, 1);
}

RawGrpcConnection::~RawGrpcConnection() {
  nghttp2_session_del(session_);
  close(fd_);
}

int32_t RawGrpcConnection::Start(const std::string& path, const std::string& framed,
                                 const RawHeaders& extra, bool end_request) {
  RawHeaders fields = {{":method", "POST"},
                       {":scheme", "http"},
                       {":authority", absl::StrCat("127.0.0.1:", port_)},
                       {":path", path},
                       {"content-type", "application/grpc"},
                       {"te", "trailers"}};
  fields.insert(fields.end(), extra.begin(), extra.end());
  std::vector<nghttp2_nv> nv;
  for (const auto& field : fields) nv.push_back(Field(field));
  auto call = std::make_unique<Call>();
  call->body = framed;
  call->end_request = end_request;
  nghttp2_data_provider body{};
  body.source.ptr = call.get();
  body.read_callback = ReadBody;
  const int32_t stream_id =
      nghttp2_submit_request(session_, nullptr, nv.data(), nv.size(), &body, nullptr);
  calls_[stream_id] = std::move(call);
  return stream_id;
}

bool RawGrpcConnection::Pump(const std::function<bool()>& done, absl::Duration wait) {
  const absl::Time give_up = absl::Now() + wait;
  while (!done()) {
    if (broken_ || absl::Now() >= give_up) return false;
    const uint8_t* out;
    ssize_t size;
    while ((size = nghttp2_session_mem_send(session_, &out)) > 0) {
      if (send(fd_, out, size, MSG_NOSIGNAL) != size) broken_ = true;
    }
    pollfd readable{fd_, POLLIN, 0};
    if (poll(&readable, 1, 50) <= 0) continue;
    uint8_t in[65536];
    const ssize_t got = recv(fd_, in, sizeof(in), 0);
    if (got <= 0 || nghttp2_session_mem_recv(session_, in, got) < 0) broken_ = true;
  }
  return true;
}

void RawGrpcConnection::OpenWindow() {
  const nghttp2_settings_entry window = {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 65535};
  nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, &window, 1);
}

RawGrpcConnection::Call* RawGrpcConnection::Find(int32_t stream_id) {
  auto it = calls_.find(stream_id);
  return it == calls_.end() ? nullptr : it->second.get();
}

absl::StatusOr<RawGrpcAnswer> RawGrpcConnection::Wait(int32_t stream_id, absl::Duration wait) {
  if (!Pump([&] { return closed(stream_id); }, wait)) {
    return absl::DeadlineExceededError("the stream did not end");
  }
  return answer(stream_id);
}

int RawGrpcConnection::OnHeader(nghttp2_session*, const nghttp2_frame* frame,
                                const uint8_t* name, size_t name_size, const uint8_t* value,
                                size_t value_size, uint8_t, void* self) {
  Call* found = static_cast<RawGrpcConnection*>(self)->Find(frame->hd.stream_id);
  if (!found) return 0;
  Call& call = *found;
  auto& fields = frame->headers.cat == NGHTTP2_HCAT_HEADERS && call.head_seen
                     ? call.answer.trailers
                     : call.answer.headers;
  fields.emplace_back(std::string(reinterpret_cast<const char*>(name), name_size),
                      std::string(reinterpret_cast<const char*>(value), value_size));
  return 0;
}

int RawGrpcConnection::OnFrame(nghttp2_session*, const nghttp2_frame* frame, void* self) {
  auto& connection = *static_cast<RawGrpcConnection*>(self);
  if (frame->hd.type == NGHTTP2_GOAWAY) {
    ++connection.goaways_;
    connection.goaway_last_stream_id_ = frame->goaway.last_stream_id;
  }
  Call* call = connection.Find(frame->hd.stream_id);
  if (call && frame->hd.type == NGHTTP2_HEADERS) call->head_seen = true;
  return 0;
}

int RawGrpcConnection::OnData(nghttp2_session*, uint8_t, int32_t stream_id,
                              const uint8_t* data, size_t size, void* self) {
  Call* call = static_cast<RawGrpcConnection*>(self)->Find(stream_id);
  if (call) call->answer.data.append(reinterpret_cast<const char*>(data), size);
  return 0;
}

int RawGrpcConnection::OnClose(nghttp2_session*, int32_t stream_id, uint32_t error_code,
                               void* self) {
  if (Call* call = static_cast<RawGrpcConnection*>(self)->Find(stream_id)) {
    call->closed = true;
    call->answer.error_code = error_code;
  }
  return 0;
}

ssize_t RawGrpcConnection::ReadBody(nghttp2_session*, int32_t, uint8_t* buffer, size_t length,
                                    uint32_t* flags, nghttp2_data_source* source, void*) {
  Call& call = *static_cast<Call*>(source->ptr);
  const size_t size = std::min(length, call.body.size());
  std::memcpy(buffer, call.body.data(), size);
  call.body.erase(0, size);
  if (call.body.empty()) {
    *flags |= NGHTTP2_DATA_FLAG_EOF;
    if (!call.end_request) *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
  }
  return static_cast<ssize_t>(size);
}

absl::StatusOr<RawGrpcAnswer> RawGrpcCall(int port, const std::string& path,
                                          const std::string& framed, const RawHeaders& extra,
                                          absl::Duration wait) {
  auto connection = RawGrpcConnection::Open(port);
  if (!connection.ok()) return connection.status();
  const int32_t stream_id = (*connection)->Start(path, framed, extra);
  return (*connection)->Wait(stream_id, wait);
}

}  // namespace egress::testing
