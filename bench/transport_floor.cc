// The floor under egressd's per-fetch cost (issue 15): egress.v1.Egress whose Fetch
// sends a GET for the request's URL over a pooled keep-alive connection and answers with
// the status and the body, and does nothing else: no policy, limits, metrics, access log
// or headers, a parser that knows Content-Length only, no timeouts. It accepts
// egressd's flags, so bench/ab.py runs it as an egressd variant; --handoff says where
// the upstream exchange runs:
//   loop          the gRPC thread hands it to the connection's event loop, which writes
//                 the request, reads the response and finishes the RPC (egressd's way)
//   caller_write  the gRPC thread writes the request and arms the read; the loop reads
//                 and finishes the RPC (no hand-off into the loop)
//   blocking      the gRPC thread writes, waits for the response and finishes the RPC
//                 itself (no hand-off at all; a gRPC thread blocked on an upstream is no
//                 design for a proxy, only the bound)
//
//   transport_floor --grpc_listen=127.0.0.1:50061 --handoff=loop
#include <sys/socket.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/string_view.h"
#include "boost/asio/executor_work_guard.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/post.hpp"
#include "boost/asio/read.hpp"
#include "boost/asio/write.hpp"
#include "bench/floor_http1.h"
#include "egress/v1/egress.grpc.pb.h"
#include "grpcpp/grpcpp.h"

ABSL_FLAG(std::string, grpc_listen, "127.0.0.1:50061", "address to serve gRPC on");
ABSL_FLAG(std::string, handoff, "loop", "loop, caller_write or blocking (see the top)");
ABSL_FLAG(int, loops, 2, "event loops (threads) the connections are spread over");
// egressd's other flags: bench/ignored_egressd_flags.cc.

namespace {

namespace net = boost::asio;
using net::ip::tcp;
using Connection = egress::bench::UpstreamConnection;
using egress::bench::UpstreamGet;

// One origin's idle connections, spread over the loops as they are made.
class Pool {
 public:
  explicit Pool(std::vector<std::unique_ptr<net::io_context>>& loops) : loops_(loops) {}

  std::unique_ptr<Connection> Take(const tcp::endpoint& upstream) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!idle_.empty()) {
        auto connection = std::move(idle_.back());
        idle_.pop_back();
        return connection;
      }
    }
    return Connection::Connect(*loops_[next_++ % loops_.size()], upstream);
  }

  void Return(std::unique_ptr<Connection> connection) {
    std::lock_guard<std::mutex> lock(mu_);
    idle_.push_back(std::move(connection));
  }

 private:
  std::vector<std::unique_ptr<net::io_context>>& loops_;
  std::atomic<size_t> next_{0};
  std::mutex mu_;
  std::vector<std::unique_ptr<Connection>> idle_;
};

// One Fetch: its connection, its request on the wire, and the RPC it finishes.
struct Exchange {
  grpc::ServerUnaryReactor* reactor;
  egress::v1::FetchResponse* response;
  Pool* pool;
  std::unique_ptr<Connection> connection;
  std::string request;

  void Fail(absl::string_view what) {
    reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, std::string(what)));
    delete this;  // the connection closes with it
  }

  void Succeed() {
    response->set_status_code(connection->reader.status);
    response->set_body(connection->reader.TakeBody());
    pool->Return(std::move(connection));
    reactor->Finish(grpc::Status::OK);
    delete this;
  }

  void Write() {
    net::async_write(connection->socket, net::buffer(request),
                     [this](boost::system::error_code ec, size_t) {
                       if (ec) return Fail("write");
                       Read();
                     });
  }

  void Read() {
    connection->socket.async_read_some(
        net::buffer(connection->scratch), [this](boost::system::error_code ec, size_t got) {
          if (ec) return Fail("read");
          connection->reader.bytes.append(connection->scratch.data(), got);
          if (connection->reader.Complete()) return Succeed();
          Read();
        });
  }

  // Writes with a non-blocking send from the calling thread; false if it would block.
  bool WriteHere() {
    const ssize_t sent = ::send(connection->socket.native_handle(), request.data(),
                                request.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    return sent == static_cast<ssize_t>(request.size());
  }

  void RunBlocking() {
    boost::system::error_code ec;
    net::write(connection->socket, net::buffer(request), ec);
    if (ec) return Fail("write");
    while (!connection->reader.Complete()) {
      const size_t got = connection->socket.read_some(net::buffer(connection->scratch), ec);
      if (ec) return Fail("read");
      connection->reader.bytes.append(connection->scratch.data(), got);
    }
    Succeed();
  }
};

class Floor final : public egress::v1::Egress::CallbackService {
 public:
  Floor(std::string handoff, int loops) : handoff_(std::move(handoff)), pool_(loops_) {
    for (int i = 0; i < loops; ++i) {
      loops_.push_back(std::make_unique<net::io_context>(1));
      guards_.emplace_back(loops_.back()->get_executor());
      threads_.emplace_back([loop = loops_.back().get()] { loop->run(); });
    }
  }

  grpc::ServerUnaryReactor* Fetch(grpc::CallbackServerContext* context,
                                  const egress::v1::FetchRequest* request,
                                  egress::v1::FetchResponse* response) override {
    auto* reactor = context->DefaultReactor();
    std::optional<UpstreamGet> get = UpstreamGet::For(request->url());
    if (!get) {
      reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "http://ip:port only"));
      return reactor;
    }
    auto* exchange = new Exchange{reactor, response, &pool_, pool_.Take(get->upstream),
                                  std::move(get->request)};
    if (!exchange->connection) {
      exchange->Fail("connect");
    } else if (handoff_ == "blocking") {
      exchange->RunBlocking();
    } else if (handoff_ == "caller_write") {
      if (!exchange->WriteHere()) return exchange->Fail("write"), reactor;
      exchange->Read();  // initiated here; completes on the connection's loop
    } else {
      net::post(exchange->connection->socket.get_executor(), [exchange] { exchange->Write(); });
    }
    return reactor;
  }

 private:
  const std::string handoff_;
  std::vector<std::unique_ptr<net::io_context>> loops_;
  std::vector<net::executor_work_guard<net::io_context::executor_type>> guards_;
  std::vector<std::thread> threads_;
  Pool pool_;
};

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string handoff = absl::GetFlag(FLAGS_handoff);
  if (handoff != "loop" && handoff != "caller_write" && handoff != "blocking") return 2;
  Floor service(handoff, absl::GetFlag(FLAGS_loops));
  grpc::ServerBuilder builder;
  builder.AddListeningPort(absl::GetFlag(FLAGS_grpc_listen), grpc::InsecureServerCredentials());
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) return 1;
  server->Wait();  // until killed
  std::exit(0);  // the loops run until the process ends
}
