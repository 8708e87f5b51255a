// The client's retries of a fetch a stopping egressd turned away, against a fake egressd
// that answers each Fetch and FetchStream with the next status of a script and counts
// the attempts: what is retried (a refusal; a cancelled GET), what is not (a cancelled
// POST, any other UNAVAILABLE, a stream that already sent a chunk), and the bounds
// (shutdown_retries, 0 included).
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "client/egress_client.h"
#include "google/rpc/status.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace egress::client {
namespace {

grpc::Status WithReason(grpc::StatusCode code, const std::string& reason) {
  google::rpc::ErrorInfo info;
  info.set_reason(reason);
  info.set_domain("egress.v1");
  google::rpc::Status status;
  status.set_code(code);
  status.set_message(reason);
  status.add_details()->PackFrom(info);
  return grpc::Status(code, reason, status.SerializeAsString());
}

const grpc::Status kShuttingDown = WithReason(grpc::StatusCode::UNAVAILABLE, "SHUTTING_DOWN");
const grpc::Status kUnreachable = WithReason(grpc::StatusCode::UNAVAILABLE, "UPSTREAM_UNREACHABLE");
const grpc::Status kCancelled(grpc::StatusCode::CANCELLED, "");

class ScriptedEgress final : public v1::Egress::Service {
 public:
  // Answers attempt i with script[i], and OK once the script runs out.
  void Script(std::vector<grpc::Status> script) {
    std::lock_guard<std::mutex> lock(mu_);
    script_ = std::move(script);
    attempts_ = 0;
  }
  int attempts() {
    std::lock_guard<std::mutex> lock(mu_);
    return attempts_;
  }
  // FetchStream sends a head chunk before its scripted status.
  bool stream_sends_head = false;

  grpc::Status Fetch(grpc::ServerContext*, const v1::FetchRequest*,
                     v1::FetchResponse* response) override {
    response->set_status_code(200);
    return Next();
  }
  grpc::Status FetchStream(grpc::ServerContext*, const v1::FetchRequest*,
                           grpc::ServerWriter<v1::FetchChunk>* writer) override {
    if (stream_sends_head) {
      v1::FetchChunk head;
      head.mutable_head()->set_status_code(200);
      writer->Write(head);
    }
    return Next();
  }

 private:
  grpc::Status Next() {
    std::lock_guard<std::mutex> lock(mu_);
    const int attempt = attempts_++;
    return attempt < static_cast<int>(script_.size()) ? script_[attempt] : grpc::Status::OK;
  }

  std::mutex mu_;
  std::vector<grpc::Status> script_;
  int attempts_ = 0;
};

class ShutdownRetryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int port = 0;
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&egress_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(port, 0);
    target_ = "127.0.0.1:" + std::to_string(port);
  }
  void TearDown() override { server_->Shutdown(); }

  EgressClient Client(int shutdown_retries = 3) {
    ClientOptions options;
    options.target = target_;
    options.shutdown_retries = shutdown_retries;
    return EgressClient(std::move(options));
  }
  static FetchOptions Method(const std::string& method) {
    FetchOptions options;
    options.method = method;
    return options;
  }

  ScriptedEgress egress_;
  std::unique_ptr<grpc::Server> server_;
  std::string target_;
};

TEST_F(ShutdownRetryTest, ARefusedFetchIsSentAgainWhateverItsMethod) {
  egress_.Script({kShuttingDown});
  EXPECT_TRUE(Client().Fetch("http://example.test/", Method("POST")).ok());
  EXPECT_EQ(egress_.attempts(), 2);
}

TEST_F(ShutdownRetryTest, ACancelledGetIsSentAgainButACancelledPostIsNot) {
  egress_.Script({kCancelled});
  EXPECT_TRUE(Client().Fetch("http://example.test/").ok());
  EXPECT_EQ(egress_.attempts(), 2);

  egress_.Script({kCancelled});
  const auto post = Client().Fetch("http://example.test/", Method("POST"));
  EXPECT_EQ(post.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(egress_.attempts(), 1);
}

TEST_F(ShutdownRetryTest, AnotherUnavailableIsNotSentAgain) {
  egress_.Script({kUnreachable});
  const auto fetch = Client().Fetch("http://example.test/");
  EXPECT_EQ(fetch.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(egress_.attempts(), 1);
}

TEST_F(ShutdownRetryTest, RetriesStopAtShutdownRetriesAndZeroTurnsThemOff) {
  egress_.Script({kShuttingDown, kShuttingDown, kShuttingDown, kShuttingDown, kShuttingDown});
  const auto fetch = Client(/*shutdown_retries=*/3).Fetch("http://example.test/");
  EXPECT_EQ(fetch.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(egress_.attempts(), 4);

  egress_.Script({kShuttingDown});
  EXPECT_EQ(Client(/*shutdown_retries=*/0).Fetch("http://example.test/").status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(egress_.attempts(), 1);
}

TEST_F(ShutdownRetryTest, AStreamIsSentAgainOnlyBeforeItsFirstChunk) {
  const auto ignore = [](absl::string_view) { return true; };
  egress_.Script({kShuttingDown});
  EXPECT_TRUE(Client().FetchStream("http://example.test/", {}, ignore).ok());
  EXPECT_EQ(egress_.attempts(), 2);

  egress_.stream_sends_head = true;
  egress_.Script({kCancelled});
  const auto stream = Client().FetchStream("http://example.test/", {}, ignore);
  EXPECT_EQ(stream.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(egress_.attempts(), 1);
}

}  // namespace
}  // namespace egress::client
