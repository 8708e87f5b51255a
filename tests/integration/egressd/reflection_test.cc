// Server reflection (grpc.reflection.v1alpha) on the Egress port: what grpcurl-style tools
// ask. Each case runs against both data planes, so what the loops answer is what gRPC's
// library plugin answers; the loops' own bound (a request message must fit its stream's
// flow-control window, which comes back only as the requests are answered) has its own.
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "egress/internal/server_reflection.pb.h"
#include "gmock/gmock.h"
#include "google/protobuf/descriptor.pb.h"
#include "grpcpp/generic/generic_stub.h"
#include "service/dataplane/grpc_framing.h"
#include "service/dataplane/server_reflection.h"
#include "service/dataplane/server_session.h"
#include "tests/support/egress_fixture.h"
#include "tests/support/raw_grpc_call.h"
#include "tests/support/wait_for.h"

namespace egress::testing {
namespace {

using ReflectionRequest = egress::internal::server_reflection::ServerReflectionRequest;
using ReflectionResponse = egress::internal::server_reflection::ServerReflectionResponse;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsSupersetOf;

// One ServerReflectionInfo call, driven one request and one answer at a time.
class ReflectionCall : public grpc::ClientBidiReactor<ReflectionRequest, ReflectionResponse> {
 public:
  explicit ReflectionCall(const std::shared_ptr<grpc::Channel>& channel) : stub_(channel) {
    context_.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    stub_.PrepareBidiStreamingCall(&context_, std::string(dataplane::kServerReflectionInfo),
                                   grpc::StubOptions(), this);
    StartCall();
  }

  // Sends `request` and waits for its answer (none once the call has ended).
  std::optional<ReflectionResponse> Ask(const ReflectionRequest& request) {
    request_ = request;
    response_.Clear();
    StartRead(&response_);  // first: the answer may be the call's end
    StartWrite(&request_);
    const bool written = WaitFor(written_);
    if (!WaitFor(read_) || !written) return std::nullopt;
    return response_;
  }
  // Ends the requests and waits for the call's status.
  grpc::Status Close() {
    StartWritesDone();
    return Wait();
  }
  // Waits for the call's status (after an Ask that got no answer: the call has ended).
  grpc::Status Wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return status_.has_value(); });
    return *status_;
  }

 private:
  bool WaitFor(std::optional<bool>& outcome) {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return outcome.has_value(); });
    return *std::exchange(outcome, std::nullopt);
  }
  void Set(std::optional<bool>& outcome, bool ok) {
    std::lock_guard<std::mutex> lock(mutex_);
    outcome = ok;
    changed_.notify_all();
  }
  void OnWriteDone(bool ok) override { Set(written_, ok); }
  void OnReadDone(bool ok) override { Set(read_, ok); }
  void OnDone(const grpc::Status& status) override {
    std::lock_guard<std::mutex> lock(mutex_);
    status_ = status;
    changed_.notify_all();
  }

  grpc::TemplatedGenericStub<ReflectionRequest, ReflectionResponse> stub_;
  grpc::ClientContext context_;
  ReflectionRequest request_;
  ReflectionResponse response_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::optional<bool> written_;
  std::optional<bool> read_;
  std::optional<grpc::Status> status_;
};

std::vector<std::string> FileNames(const ReflectionResponse& response) {
  std::vector<std::string> names;
  for (const std::string& bytes : response.file_descriptor_response().file_descriptor_proto()) {
    google::protobuf::FileDescriptorProto file;
    EXPECT_TRUE(file.ParseFromString(bytes));
    names.push_back(file.name());
  }
  return names;
}

class ReflectionTest : public EgressTest, public ::testing::WithParamInterface<DataPlane> {
 protected:
  std::shared_ptr<grpc::Channel> Channel() {
    return grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->grpc_port()),
                               grpc::InsecureChannelCredentials());
  }
};

TEST_P(ReflectionTest, ListsTheServicesAndDescribesEgressWithTheFilesItImports) {
  StartEgress({}, GetParam());
  ReflectionCall call(Channel());
  ReflectionRequest list;
  list.set_host("egress.test");
  list.set_list_services("");
  const auto services = call.Ask(list);
  ASSERT_TRUE(services.has_value());
  EXPECT_EQ(services->valid_host(), "egress.test");
  EXPECT_TRUE(services->original_request().has_list_services());
  std::vector<std::string> names;
  for (const auto& service : services->list_services_response().service()) {
    names.push_back(service.name());
  }
  EXPECT_THAT(names, IsSupersetOf({"egress.v1.Egress", "grpc.reflection.v1alpha.ServerReflection"}));

  ReflectionRequest symbol;
  symbol.set_file_containing_symbol("egress.v1.Egress");
  const auto egress = call.Ask(symbol);
  ASSERT_TRUE(egress.has_value());
  const std::vector<std::string> files = FileNames(*egress);
  ASSERT_FALSE(files.empty());
  EXPECT_EQ(files.front(), "egress/v1/egress.proto");
  google::protobuf::FileDescriptorProto first;
  ASSERT_TRUE(first.ParseFromString(egress->file_descriptor_response().file_descriptor_proto(0)));
  std::vector<std::string> services_in_file;
  for (const auto& service : first.service()) services_in_file.push_back(service.name());
  EXPECT_THAT(services_in_file, ::testing::Contains("Egress"));
  // Every file it imports comes with it, so a tool can build its descriptors.
  for (const std::string& dependency : first.dependency()) {
    EXPECT_THAT(files, ::testing::Contains(dependency));
  }
  // Asked again by name, the file comes again; the loops leave out what it imports, sent
  // already on this call, as grpc-go does (gRPC 1.51's plugin sends it all again).
  ReflectionRequest by_name;
  by_name.set_file_by_filename("egress/v1/egress.proto");
  const auto again = call.Ask(by_name);
  ASSERT_TRUE(again.has_value());
  EXPECT_THAT(FileNames(*again), ::testing::Contains("egress/v1/egress.proto"));
  if (GetParam() == DataPlane::kLoops) {
    EXPECT_THAT(FileNames(*again), ElementsAre("egress/v1/egress.proto"));
  }
  EXPECT_TRUE(call.Close().ok());
}

TEST_P(ReflectionTest, AnUnknownSymbolIsNotFoundAndTheCallGoesOn) {
  StartEgress({}, GetParam());
  ReflectionCall call(Channel());
  ReflectionRequest unknown;
  unknown.set_file_containing_symbol("no.such.Service");
  const auto missing = call.Ask(unknown);
  ASSERT_TRUE(missing.has_value());
  EXPECT_EQ(missing->error_response().error_code(), static_cast<int>(grpc::StatusCode::NOT_FOUND));
  ReflectionRequest file;
  file.set_file_by_filename("no/such.proto");
  const auto no_file = call.Ask(file);
  ASSERT_TRUE(no_file.has_value());
  EXPECT_EQ(no_file->error_response().error_code(), static_cast<int>(grpc::StatusCode::NOT_FOUND));
  ReflectionRequest type;
  type.set_all_extension_numbers_of_type("egress.v1.FetchRequest");
  const auto numbers = call.Ask(type);
  ASSERT_TRUE(numbers.has_value());
  EXPECT_EQ(numbers->all_extension_numbers_response().base_type_name(), "egress.v1.FetchRequest");
  EXPECT_EQ(numbers->all_extension_numbers_response().extension_number_size(), 0);
  EXPECT_TRUE(call.Close().ok());
}

INSTANTIATE_TEST_SUITE_P(BothDataPlanes, ReflectionTest,
                         ::testing::Values(DataPlane::kGrpcLibrary, DataPlane::kLoops),
                         [](const ::testing::TestParamInfo<DataPlane>& info) {
                           return info.param == DataPlane::kLoops ? "Loops" : "GrpcLibrary";
                         });

class LoopReflectionTest : public EgressTest {};

// A caller that sends requests and reads no answer holds no more of the server than its
// stream's window: the server reads the next request once the answer to the last is taken.
TEST_F(LoopReflectionTest, RequestsSentFasterThanTheirAnswersAreReadAreHeldBackByFlowControl) {
  StartEgress({}, DataPlane::kLoops);
  auto connection = RawGrpcConnection::Open(server_->grpc_port(), /*initial_window=*/0);
  ASSERT_TRUE(connection.ok()) << connection.status();
  ReflectionRequest list;
  list.set_host(std::string(1000, 'h'));
  list.set_list_services("");
  std::string one;
  list.SerializeToString(&one);
  std::string requests;
  constexpr int kRequests = 200;  // about 200 KB, three windows' worth
  for (int i = 0; i < kRequests; ++i) requests += dataplane::FrameMessage(one);
  const int32_t stream = (*connection)->Start(std::string(dataplane::kServerReflectionInfo),
                                              requests, {}, /*end_request=*/false);
  (*connection)->Pump([] { return false; }, absl::Seconds(1));
  // The first answer waits for a window the caller never opened: the server took the
  // first window's bytes and one message's more, no further.
  EXPECT_TRUE((*connection)->head_seen(stream));
  EXPECT_GE((*connection)->request_left(stream), requests.size() - 65535 - one.size() - 5);
  (*connection)->OpenWindow();
  EXPECT_TRUE((*connection)->Pump([&] { return (*connection)->request_sent(stream); },
                                  absl::Seconds(20)));
  EXPECT_FALSE((*connection)->ended());
}

// nghttp2 gives a stream's window back once half of it is read, so up to half may be
// read and not yet given back when a message comes: one at the bound still fits.
TEST_F(LoopReflectionTest, ARequestAtTheBoundIsAnsweredAfterSmallerOnesWereRead) {
  StartEgress({}, DataPlane::kLoops);
  ReflectionCall call(grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->grpc_port()),
                                          grpc::InsecureChannelCredentials()));
  ReflectionRequest small;
  small.set_host(std::string(994, 'h'));  // 1,000 bytes: 32 of them stay below half
  small.set_list_services("");
  for (int i = 0; i < 32; ++i) ASSERT_TRUE(call.Ask(small).has_value()) << i;
  ReflectionRequest at_bound;
  at_bound.set_list_services("");
  at_bound.set_host(std::string(dataplane::ServerSession::kStreamedMessageBound.bytes - 6, 'h'));
  ASSERT_EQ(at_bound.ByteSizeLong(), dataplane::ServerSession::kStreamedMessageBound.bytes);
  const auto answer = call.Ask(at_bound);
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->valid_host().size(), at_bound.host().size());
  EXPECT_TRUE(call.Close().ok());
}

TEST_F(LoopReflectionTest, ARequestLargerThanAStreamsWindowIsResourceExhausted) {
  StartEgress({}, DataPlane::kLoops);
  ReflectionCall call(grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->grpc_port()),
                                          grpc::InsecureChannelCredentials()));
  ReflectionRequest large;
  large.set_host(std::string(70 * 1024, 'h'));
  large.set_list_services("");
  EXPECT_FALSE(call.Ask(large).has_value());
  const grpc::Status status = call.Wait();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(status.error_message(), HasSubstr("larger than egressd accepts"));
  EXPECT_EQ(observer_.Refused(CallRefusal::kBadRequestMessage), 1);
}

}  // namespace
}  // namespace egress::testing
