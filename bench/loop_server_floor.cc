// The floor of the other design for issue 15: a gRPC server of our own, on the same
// event loops as the upstream connections, so that a fetch never leaves its loop's
// thread. egress.v1.Egress/Fetch over HTTP/2 (nghttp2, cleartext, prior knowledge) whose
// Fetch does what bench/transport_floor's does (a GET on a pooled keep-alive connection,
// Content-Length only, status and body in the answer) and nothing else: no TLS, no
// deadlines, no flow control beyond nghttp2's defaults, no other method, no health or
// reflection. A measurement of what such a server could cost, not a server to run.
// It accepts egressd's flags, so bench/ab.py runs it as an egressd variant. h2load counts
// every HTTP 200 as a success, and a failed fetch is an HTTP 200 with a grpc-status in its
// trailers: on SIGTERM (ab.py's stop) the floor prints how many answers had each status.
//
//   loop_server_floor --grpc_listen=127.0.0.1:50061 --loops=2
#include <nghttp2/nghttp2.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/string_view.h"
#include "bench/floor_http1.h"
#include "boost/asio/detail/socket_option.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/read.hpp"
#include "boost/asio/write.hpp"
#include "egress/v1/egress.pb.h"

ABSL_FLAG(std::string, grpc_listen, "127.0.0.1:50061", "address to serve gRPC on");
ABSL_FLAG(int, loops, 2, "event loops (threads), each accepting on the port (SO_REUSEPORT)");
// egressd's other flags: bench/ignored_egressd_flags.cc.

namespace {

namespace net = boost::asio;
using net::ip::tcp;
using Upstream = egress::bench::UpstreamConnection;
using egress::bench::UpstreamGet;
using ReusePort = net::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>;

// The gRPC status codes the floor answers with, their text, and how many answers had each.
constexpr int kOk = 0, kInvalidArgument = 3, kUnimplemented = 12, kUnavailable = 14;
constexpr const char* kStatusText[] = {"0", "1", "2", "3",  "4",  "5",  "6",  "7",
                                       "8", "9", "10", "11", "12", "13", "14"};
std::atomic<uint64_t> answers[15];

// A loop's idle upstream connections, by address. Only its thread touches it: no lock.
class UpstreamPool {
 public:
  explicit UpstreamPool(net::io_context& loop) : loop_(loop) {}

  std::unique_ptr<Upstream> Take(const tcp::endpoint& address) {
    auto& idle = idle_[address];
    if (!idle.empty()) {
      auto upstream = std::move(idle.back());
      idle.pop_back();
      return upstream;
    }
    return Upstream::Connect(loop_, address);
  }

  void Return(const tcp::endpoint& address, std::unique_ptr<Upstream> upstream) {
    idle_[address].push_back(std::move(upstream));
  }

 private:
  net::io_context& loop_;
  std::map<tcp::endpoint, std::vector<std::unique_ptr<Upstream>>> idle_;
};

// One caller's HTTP/2 connection: its nghttp2 session, and the fetches its streams carry.
class CallerConnection : public std::enable_shared_from_this<CallerConnection> {
 public:
  CallerConnection(tcp::socket socket, UpstreamPool& pool)
      : socket_(std::move(socket)), pool_(pool) {}
  ~CallerConnection() { nghttp2_session_del(session_); }

  void Start() {
    socket_.set_option(tcp::no_delay(true));
    nghttp2_session_callbacks* callbacks;
    nghttp2_session_callbacks_new(&callbacks);
    nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks, OnBeginHeaders);
    nghttp2_session_callbacks_set_on_header_callback(callbacks, OnHeader);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, OnData);
    nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, OnFrame);
    nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, OnStreamClose);
    nghttp2_session_server_new(&session_, callbacks, this);
    nghttp2_session_callbacks_del(callbacks);
    // No stream limit of its own, as gRPC's server.
    nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, nullptr, 0);
    Flush();
    Read();
  }

 private:
  // A stream's request message as it arrives, then its answer as it leaves.
  struct Stream {
    bool is_fetch = false;  // :path is egress.v1.Egress/Fetch
    std::string request;   // gRPC length-prefixed message
    std::string answer;    // the same, for the response
    size_t answered = 0;   // bytes of `answer` given to nghttp2
    const char* grpc_status = "0";  // for the trailers
  };

  // One fetch under way on this loop: the stream it answers (gone if the caller reset it).
  struct Fetch {
    std::shared_ptr<CallerConnection> connection;
    int32_t stream_id;
    tcp::endpoint address;
    std::unique_ptr<Upstream> upstream;
    std::string request;
  };

  void Read() {
    socket_.async_read_some(net::buffer(input_), [self = shared_from_this()](
                                                     boost::system::error_code ec, size_t got) {
      if (ec) return;  // the caller went away: the session ends with this object
      const auto* data = reinterpret_cast<const uint8_t*>(self->input_.data());
      self->receiving_ = true;
      const ssize_t taken = nghttp2_session_mem_recv(self->session_, data, got);
      self->receiving_ = false;
      if (taken < 0) return;
      self->Flush();
      self->Read();
    });
  }

  // Writes what nghttp2 has to send, one write at a time; not from nghttp2's callbacks
  // (Read flushes after them).
  void Flush() {
    if (writing_ || receiving_) return;
    output_.clear();
    const uint8_t* data;
    ssize_t size;
    while ((size = nghttp2_session_mem_send(session_, &data)) > 0) {
      output_.append(reinterpret_cast<const char*>(data), size);
    }
    if (output_.empty()) return;
    writing_ = true;
    net::async_write(socket_, net::buffer(output_),
                     [self = shared_from_this()](boost::system::error_code ec, size_t) {
                       self->writing_ = false;
                       if (!ec) self->Flush();
                     });
  }

  static CallerConnection& Of(void* user_data) {
    return *static_cast<CallerConnection*>(user_data);
  }

  static int OnBeginHeaders(nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
    if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
      Of(user_data).streams_[frame->hd.stream_id];
    }
    return 0;
  }

  static int OnHeader(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name,
                      size_t name_size, const uint8_t* value, size_t value_size, uint8_t,
                      void* user_data) {
    const absl::string_view field(reinterpret_cast<const char*>(name), name_size);
    const absl::string_view path(reinterpret_cast<const char*>(value), value_size);
    auto& streams = Of(user_data).streams_;
    if (auto it = streams.find(frame->hd.stream_id); it != streams.end() && field == ":path") {
      it->second.is_fetch = path == "/egress.v1.Egress/Fetch";
    }
    return 0;
  }

  static int OnData(nghttp2_session*, uint8_t, int32_t stream_id, const uint8_t* data,
                    size_t size, void* user_data) {
    auto& streams = Of(user_data).streams_;
    if (auto it = streams.find(stream_id); it != streams.end()) {
      it->second.request.append(reinterpret_cast<const char*>(data), size);
    }
    return 0;
  }

  static int OnFrame(nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
    const bool request_ends = (frame->hd.type == NGHTTP2_DATA ||
                               frame->hd.type == NGHTTP2_HEADERS) &&
                              (frame->hd.flags & NGHTTP2_FLAG_END_STREAM);
    if (request_ends) Of(user_data).StartFetch(frame->hd.stream_id);
    return 0;
  }

  static int OnStreamClose(nghttp2_session*, int32_t stream_id, uint32_t, void* user_data) {
    Of(user_data).streams_.erase(stream_id);
    return 0;
  }

  void StartFetch(int32_t stream_id) {
    if (!streams_[stream_id].is_fetch) return Answer(stream_id, nullptr, kUnimplemented);
    const std::string& message = streams_[stream_id].request;
    egress::v1::FetchRequest request;
    std::optional<UpstreamGet> get;
    if (message.size() >= 5 && request.ParseFromArray(message.data() + 5, message.size() - 5)) {
      get = UpstreamGet::For(request.url());
    }
    if (!get) return Answer(stream_id, nullptr, kInvalidArgument);
    auto upstream = pool_.Take(get->upstream);
    if (!upstream) return Answer(stream_id, nullptr, kUnavailable);
    auto* fetch = new Fetch{shared_from_this(), stream_id, get->upstream, std::move(upstream),
                            std::move(get->request)};
    net::async_write(fetch->upstream->socket, net::buffer(fetch->request),
                     [fetch](boost::system::error_code ec, size_t) {
                       if (ec) return fetch->connection->EndFetch(fetch, false);
                       fetch->connection->ReadUpstream(fetch);
                     });
  }

  void ReadUpstream(Fetch* fetch) {
    Upstream& upstream = *fetch->upstream;
    upstream.socket.async_read_some(
        net::buffer(upstream.scratch), [fetch](boost::system::error_code ec, size_t got) {
          if (ec) return fetch->connection->EndFetch(fetch, false);
          Upstream& upstream = *fetch->upstream;
          upstream.reader.bytes.append(upstream.scratch.data(), got);
          if (!upstream.reader.Complete()) return fetch->connection->ReadUpstream(fetch);
          fetch->connection->EndFetch(fetch, true);
        });
  }

  void EndFetch(Fetch* fetch, bool ok) {
    const std::shared_ptr<CallerConnection> self = fetch->connection;  // outlives `owned`
    std::unique_ptr<Fetch> owned(fetch);
    if (!ok) return Answer(fetch->stream_id, nullptr, kUnavailable);
    egress::v1::FetchResponse response;
    response.set_status_code(fetch->upstream->reader.status);
    response.set_body(fetch->upstream->reader.TakeBody());
    pool_.Return(fetch->address, std::move(fetch->upstream));
    Answer(fetch->stream_id, &response, kOk);
  }

  // Answers a stream: headers, the message (if any), then trailers with grpc-status.
  void Answer(int32_t stream_id, const egress::v1::FetchResponse* response, int grpc_status) {
    auto it = streams_.find(stream_id);
    if (it == streams_.end()) return;  // reset by the caller meanwhile
    answers[grpc_status].fetch_add(1, std::memory_order_relaxed);
    Stream& stream = it->second;
    stream.grpc_status = kStatusText[grpc_status];
    if (response) {
      const uint32_t size = response->ByteSizeLong();
      stream.answer.resize(5 + size);
      stream.answer[0] = 0;  // not compressed
      for (int i = 0; i < 4; ++i) stream.answer[1 + i] = static_cast<char>(size >> (24 - 8 * i));
      response->SerializeToArray(stream.answer.data() + 5, size);
    }
    const nghttp2_nv headers[] = {Field(":status", "200"),
                                  Field("content-type", "application/grpc")};
    nghttp2_data_provider body;
    body.source.ptr = &stream;
    body.read_callback = ReadAnswer;
    nghttp2_submit_response(session_, stream_id, headers, 2, &body);
    Flush();
  }

  static ssize_t ReadAnswer(nghttp2_session* session, int32_t stream_id, uint8_t* buffer,
                            size_t length, uint32_t* flags, nghttp2_data_source* source,
                            void*) {
    Stream& stream = *static_cast<Stream*>(source->ptr);
    const size_t size = std::min(length, stream.answer.size() - stream.answered);
    std::memcpy(buffer, stream.answer.data() + stream.answered, size);
    stream.answered += size;
    if (stream.answered == stream.answer.size()) {
      *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
      const nghttp2_nv trailers[] = {Field("grpc-status", stream.grpc_status)};
      nghttp2_submit_trailer(session, stream_id, trailers, 1);
    }
    return static_cast<ssize_t>(size);
  }

  static nghttp2_nv Field(const char* name, const char* value) {
    return {reinterpret_cast<uint8_t*>(const_cast<char*>(name)),
            reinterpret_cast<uint8_t*>(const_cast<char*>(value)), std::strlen(name),
            std::strlen(value), NGHTTP2_NV_FLAG_NONE};
  }

  tcp::socket socket_;
  UpstreamPool& pool_;
  nghttp2_session* session_ = nullptr;
  std::array<char, 16384> input_;
  std::string output_;
  bool writing_ = false;
  bool receiving_ = false;  // inside nghttp2_session_mem_recv
  std::unordered_map<int32_t, Stream> streams_;
};

// One thread, its own listening socket on the shared port, its callers and upstreams.
class Loop {
 public:
  explicit Loop(const tcp::endpoint& listen) : acceptor_(context_), pool_(context_) {
    acceptor_.open(listen.protocol());
    acceptor_.set_option(tcp::acceptor::reuse_address(true));
    acceptor_.set_option(ReusePort(true));
    acceptor_.bind(listen);
    acceptor_.listen();
    Accept();
    thread_ = std::thread([this] { context_.run(); });
  }

 private:
  void Accept() {
    acceptor_.async_accept([this](boost::system::error_code ec, tcp::socket socket) {
      if (!ec) std::make_shared<CallerConnection>(std::move(socket), pool_)->Start();
      Accept();
    });
  }

  net::io_context context_{1};
  tcp::acceptor acceptor_;
  UpstreamPool pool_;
  std::thread thread_;
};

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string listen = absl::GetFlag(FLAGS_grpc_listen);
  const size_t colon = listen.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(listen.substr(colon + 1), &port)) return 2;
  const tcp::endpoint endpoint(net::ip::make_address(listen.substr(0, colon)), port);
  // Until SIGTERM or SIGINT: then the count of answers by status, and the end.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);  // before the loops' threads inherit the mask
  std::vector<std::unique_ptr<Loop>> loops;
  for (int i = 0; i < absl::GetFlag(FLAGS_loops); ++i) {
    loops.push_back(std::make_unique<Loop>(endpoint));
  }
  int signal;
  sigwait(&stop, &signal);
  std::fprintf(stderr, "loop_server_floor: answers by grpc-status:");
  for (int code = 0; code < 15; ++code) {
    if (const uint64_t count = answers[code].load()) std::fprintf(stderr, " %d: %lu", code, count);
  }
  std::fprintf(stderr, "\n");
  std::_Exit(0);  // the loops run until the process ends
}
