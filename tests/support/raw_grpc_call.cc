#include "tests/support/raw_grpc_call.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace egress::testing {
namespace {

struct Call {
  int32_t stream_id = 0;
  RawGrpcAnswer answer;
  bool head_seen = false;
  bool closed = false;
  std::string body;  // what is left to send
};

nghttp2_nv Field(const std::pair<std::string, std::string>& field) {
  return {reinterpret_cast<uint8_t*>(const_cast<char*>(field.first.data())),
          reinterpret_cast<uint8_t*>(const_cast<char*>(field.second.data())),
          field.first.size(), field.second.size(), NGHTTP2_NV_FLAG_NONE};
}

int OnHeader(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name, size_t name_size,
             const uint8_t* value, size_t value_size, uint8_t, void* user) {
  auto& call = *static_cast<Call*>(user);
  auto& fields = frame->headers.cat == NGHTTP2_HCAT_HEADERS && call.head_seen
                     ? call.answer.trailers
                     : call.answer.headers;
  fields.emplace_back(std::string(reinterpret_cast<const char*>(name), name_size),
                      std::string(reinterpret_cast<const char*>(value), value_size));
  return 0;
}

int OnFrame(nghttp2_session*, const nghttp2_frame* frame, void* user) {
  if (frame->hd.type == NGHTTP2_HEADERS) static_cast<Call*>(user)->head_seen = true;
  return 0;
}

int OnData(nghttp2_session*, uint8_t, int32_t, const uint8_t* data, size_t size, void* user) {
  static_cast<Call*>(user)->answer.data.append(reinterpret_cast<const char*>(data), size);
  return 0;
}

int OnClose(nghttp2_session*, int32_t, uint32_t, void* user) {
  static_cast<Call*>(user)->closed = true;
  return 0;
}

ssize_t ReadBody(nghttp2_session*, int32_t, uint8_t* buffer, size_t length, uint32_t* flags,
                 nghttp2_data_source*, void* user) {
  auto& body = static_cast<Call*>(user)->body;
  const size_t size = std::min(length, body.size());
  std::memcpy(buffer, body.data(), size);
  body.erase(0, size);
  if (body.empty()) *flags |= NGHTTP2_DATA_FLAG_EOF;
  return static_cast<ssize_t>(size);
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

absl::StatusOr<RawGrpcAnswer> RawGrpcCall(
    int port, const std::string& path, const std::string& framed,
    const std::vector<std::pair<std::string, std::string>>& extra, absl::Duration wait) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    close(fd);
    return absl::UnavailableError(absl::StrCat("connect to port ", port, " failed"));
  }
  Call call;
  call.body = framed;
  nghttp2_session_callbacks* callbacks;
  nghttp2_session_callbacks_new(&callbacks);
  nghttp2_session_callbacks_set_on_header_callback(callbacks, OnHeader);
  nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, OnFrame);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, OnData);
  nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, OnClose);
  nghttp2_session* session;
  nghttp2_session_client_new(&session, callbacks, &call);
  nghttp2_session_callbacks_del(callbacks);
  nghttp2_submit_settings(session, NGHTTP2_FLAG_NONE, nullptr, 0);
  std::vector<std::pair<std::string, std::string>> fields = {
      {":method", "POST"}, {":scheme", "http"}, {":authority", absl::StrCat("127.0.0.1:", port)},
      {":path", path},     {"content-type", "application/grpc"}, {"te", "trailers"}};
  fields.insert(fields.end(), extra.begin(), extra.end());
  std::vector<nghttp2_nv> nv;
  for (const auto& field : fields) nv.push_back(Field(field));
  nghttp2_data_provider body{};
  body.read_callback = ReadBody;
  call.stream_id = nghttp2_submit_request(session, nullptr, nv.data(), nv.size(), &body, nullptr);
  const absl::Time give_up = absl::Now() + wait;
  while (!call.closed && absl::Now() < give_up) {
    const uint8_t* out;
    ssize_t size;
    while ((size = nghttp2_session_mem_send(session, &out)) > 0) {
      if (send(fd, out, size, MSG_NOSIGNAL) != size) break;
    }
    pollfd readable{fd, POLLIN, 0};
    if (poll(&readable, 1, 50) <= 0) continue;
    uint8_t in[16384];
    const ssize_t got = recv(fd, in, sizeof(in), 0);
    if (got <= 0 || nghttp2_session_mem_recv(session, in, got) < 0) break;
  }
  nghttp2_session_del(session);
  close(fd);
  if (!call.closed) return absl::DeadlineExceededError("the stream did not end");
  return call.answer;
}

}  // namespace egress::testing
