#include "tests/support/transport_fixture.h"

#include <unistd.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace egress::testing {

using transport::Response;

std::unique_ptr<NginxUpstream> TransportTest::nginx_;

void TransportTest::SetUpTestSuite() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  nginx_ = NginxUpstream::Start(absl::StrCat(tmp ? tmp : "/tmp", "/nginx-transport-", getpid()));
}

void TransportTest::TearDownTestSuite() { nginx_.reset(); }

void TransportTest::TearDown() {
  if (!transport_) return;  // the test destroyed it
  EXPECT_TRUE(WaitFor([&] { return Quiet(); })) << "a connection still active or draining";
  EXPECT_EQ(observer_.streams_opened, observer_.streams_closed) << "every stream given back";
  transport_.reset();
}

void TransportTest::StartTransport(
    const std::function<void(transport::TransportSettings&)>& adjust) {
  transport_.reset();
  transport::TransportSettings settings;
  settings.extra_ca_file = nginx_->ca_file();
  settings.io_threads = 2;
  transport::PolicyRules open_policy;
  open_policy.enabled = false;  // the test upstream is on loopback
  settings.policy = std::make_shared<transport::AddressPolicy>(open_policy);
  if (adjust) adjust(settings);
  auto created = transport::Transport::Create(settings, observer_);
  ASSERT_TRUE(created.ok()) << created.status();
  transport_ = *std::move(created);
}

bool TransportTest::Quiet() {
  for (const auto& o : transport_->PoolStats()) {
    if (o.active + o.draining + o.connecting + o.streams > 0) return false;
  }
  return true;
}

std::shared_ptr<transport::PendingFetch> TransportTest::Begin(
    const std::string& url, std::promise<absl::StatusOr<Response>>& promise,
    absl::Duration timeout, const std::string& method, std::string body) {
  auto request = transport::MakeRequest(method, url, {}, std::move(body));
  EXPECT_TRUE(request.ok()) << request.status();
  return transport_->Fetch(*std::move(request), absl::Now() + timeout,
                           [&promise](absl::StatusOr<Response> r) { promise.set_value(std::move(r)); });
}

absl::StatusOr<Response> TransportTest::Get(const std::string& url, absl::Duration timeout) {
  std::promise<absl::StatusOr<Response>> promise;
  Begin(url, promise, timeout);
  return promise.get_future().get();
}

absl::StatusOr<std::string> TransportTest::ReadAll(transport::ResponseBody& body) {
  std::string all;
  while (true) {
    std::promise<absl::StatusOr<std::string>> promise;
    body.Read(16 * 1024, [&](absl::StatusOr<std::string> b) { promise.set_value(std::move(b)); });
    auto piece = promise.get_future().get();
    if (!piece.ok()) return piece.status();
    if (piece->empty()) return all;
    all += *piece;
  }
}

absl::StatusOr<std::string> TransportTest::GetBody(const std::string& url) {
  auto response = Get(url);
  if (!response.ok()) return response.status();
  if (response->head.status_code != 200) {
    return absl::InternalError(absl::StrCat("status ", response->head.status_code));
  }
  return ReadAll(*response->body);
}

}  // namespace egress::testing
