#include "service/dataplane/health_watch.h"

#include <optional>
#include <utility>
#include <vector>

#include "boost/asio/post.hpp"
#include "google/protobuf/unknown_field_set.h"
#include "service/base/error_reason.h"

namespace egress::dataplane {
namespace {

// HealthCheckRequest.service and HealthCheckResponse.status are both field 1.
constexpr int kServiceField = 1;
constexpr int kStatusField = 1;

}  // namespace

absl::StatusOr<std::string> HealthCheckService(const std::string& message) {
  google::protobuf::UnknownFieldSet request;
  if (!request.ParseFromString(message)) {
    return transport::WithReason(
        absl::InvalidArgumentError("the request message is not a grpc.health.v1.HealthCheckRequest"),
        "REQUEST_MESSAGE_UNREADABLE");
  }
  std::string service;
  for (int i = 0; i < request.field_count(); ++i) {
    const auto& field = request.field(i);
    if (field.number() == kServiceField &&
        field.type() == google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED) {
      service = field.length_delimited();
    }
  }
  return service;
}

std::string HealthCheckResponse(ServingStatus status) {
  google::protobuf::UnknownFieldSet response;
  response.AddVarint(kStatusField, static_cast<int>(status));
  std::string message;
  response.SerializeToString(&message);
  return message;
}

bool IsHealthService(const std::string& service) {
  return service.empty() || service == "egress.v1.Egress";
}

// One Watch call. Its messages go one at a time (ServerSession::Send): a change that
// comes while one is on its way is sent after it, and only the latest.
class HealthWatchers::Watcher final : public StreamWatcher,
                                public std::enable_shared_from_this<Watcher> {
 public:
  Watcher(HealthWatchers& owner, const std::shared_ptr<ServerSession>& session,
          int32_t stream_id, bool known)
      : loop_(session->executor()),
        session_(session),
        owner_(owner),
        stream_id_(stream_id),
        known_(known) {}

  bool known() const { return known_; }
  const boost::asio::any_io_executor& loop() const { return loop_; }

  // On the session's loop.
  void Tell(ServingStatus status) {
    if (gone_) return;
    if (sending_) {
      next_ = status;
      return;
    }
    if (sent_ == status) return;
    auto session = session_.lock();
    if (!session) return;
    sending_ = true;
    sent_ = status;
    session->Send(stream_id_, HealthCheckResponse(status),
                  [self = shared_from_this()](absl::Status taken) {
                    self->sending_ = false;
                    if (!taken.ok() || !self->next_) return;  // the caller went away
                    self->Tell(*std::exchange(self->next_, std::nullopt));
                  });
  }

  // The caller cancelled, or the connection went.
  void OnStreamReset() override {
    const auto self = shared_from_this();  // Remove lets go of the registry's reference
    gone_ = true;
    owner_.Remove(this);
  }

 private:
  const boost::asio::any_io_executor loop_;
  const std::weak_ptr<ServerSession> session_;
  HealthWatchers& owner_;
  const int32_t stream_id_;
  const bool known_;
  bool gone_ = false;
  bool sending_ = false;
  std::optional<ServingStatus> sent_;
  std::optional<ServingStatus> next_;
};

void HealthWatchers::Start(const std::shared_ptr<ServerSession>& session, int32_t stream_id,
                           const std::string& service) {
  const bool known = IsHealthService(service);
  auto watcher = std::make_shared<Watcher>(*this, session, stream_id, known);
  ServingStatus status;
  {
    std::lock_guard<std::mutex> lock(mu_);
    watchers_.emplace(watcher.get(), watcher);
    status = status_;
  }
  // As gRPC's default health service: an unknown service is SERVICE_UNKNOWN, and the
  // call stays open (a service registered later would be told).
  watcher->Tell(known ? status : ServingStatus::kServiceUnknown);
  session->Watch(stream_id, watcher.get());  // at once OnStreamReset if it is gone
}

void HealthWatchers::Set(ServingStatus status) {
  std::vector<std::shared_ptr<Watcher>> watchers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (status_ == status) return;
    status_ = status;
    for (const auto& [key, watcher] : watchers_) {
      if (watcher->known()) watchers.push_back(watcher);
    }
  }
  for (auto& watcher : watchers) {
    const auto loop = watcher->loop();
    boost::asio::post(loop, [watcher = std::move(watcher), status] { watcher->Tell(status); });
  }
}

ServingStatus HealthWatchers::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

void HealthWatchers::Remove(Watcher* watcher) {
  std::lock_guard<std::mutex> lock(mu_);
  watchers_.erase(watcher);
}

}  // namespace egress::dataplane
