#include "client/egress_client.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/stubs/common.h"
#include "google/protobuf/util/time_util.h"
#include "google/rpc/status.pb.h"

namespace egress::client {

namespace v1 = egress::v1;

namespace {

// The type URL of `Detail` in a google.protobuf.Any, and its payload key in absl::Status.
template <typename Detail>
std::string TypeUrl() {
  return absl::StrCat("type.googleapis.com/", Detail::descriptor()->full_name());
}

template <typename Detail>
std::optional<Detail> DetailOf(const absl::Status& status) {
  // absl::optional: Debian's Abseil does not alias it to std::optional.
  const auto payload = status.GetPayload(TypeUrl<Detail>());
  Detail detail;
  if (!payload || !detail.ParseFromString(std::string(*payload))) return std::nullopt;
  return detail;
}

absl::StatusOr<std::string> ReadPem(const std::string& what, const std::string& path) {
  if (path.empty()) return std::string();
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    return absl::InvalidArgumentError(absl::StrCat("cannot read the TLS ", what, " file ", path,
                                                   ": ", std::strerror(errno)));
  }
  std::stringstream pem;
  pem << file.rdbuf();
  if (pem.str().empty()) {
    return absl::InvalidArgumentError(absl::StrCat("the TLS ", what, " file ", path, " is empty"));
  }
  return pem.str();
}

// True when `args` has an argument named `key`.
bool HasArg(const grpc::ChannelArguments& args, absl::string_view key) {
  const grpc_channel_args c_args = args.c_channel_args();
  for (size_t i = 0; i < c_args.num_args; ++i) {
    if (key == c_args.args[i].key) return true;
  }
  return false;
}

// A channel to `target`, over TLS when `tls` asks for it, with the caller's `args` and,
// when `balance` and they choose no policy, round_robin.
absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannel(const std::string& target,
                                                           const TlsOptions& tls,
                                                           grpc::ChannelArguments args,
                                                           bool balance) {
  // Responses of any size: egressd bounds bodies itself (at most
  // limits.max_body_bytes_ceiling), and gRPC's default of 4 MiB would refuse a FULL body
  // a caller asks for with a max_body_bytes over egressd's default (4 MiB - 256 KiB).
  if (!HasArg(args, GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH)) args.SetMaxReceiveMessageSize(-1);
  // gRPC's own default, pick_first, sends every call to the first address that answers:
  // one replica of many, however many the target resolves to.
  if (balance && !HasArg(args, GRPC_ARG_SERVICE_CONFIG) && !HasArg(args, GRPC_ARG_LB_POLICY_NAME)) {
    args.SetServiceConfigJSON(kDefaultServiceConfig);
  }
  if (!tls.on()) {
    return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
  }
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    return absl::InvalidArgumentError(
        "a TLS client certificate and its key go together: set both cert_file and key_file, "
        "or neither");
  }
  auto ca = ReadPem("CA", tls.ca_file);
  if (!ca.ok()) return ca.status();
  auto cert = ReadPem("certificate", tls.cert_file);
  if (!cert.ok()) return cert.status();
  auto key = ReadPem("key", tls.key_file);
  if (!key.ok()) return key.status();
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = *std::move(ca);
  ssl.pem_cert_chain = *std::move(cert);
  ssl.pem_private_key = *std::move(key);
  if (!tls.server_name.empty()) args.SetSslTargetNameOverride(tls.server_name);
  return grpc::CreateCustomChannel(target, grpc::SslCredentials(ssl), args);
}

}  // namespace

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  // gRPC and absl number their codes alike.
  absl::Status result(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
  google::rpc::Status details;
  // Details that do not parse are left out: the code and the message still say what
  // happened. No trailer parses as no details.
  if (details.ParseFromString(status.error_details())) {
    for (const google::protobuf::Any& detail : details.details()) {
      result.SetPayload(detail.type_url(), absl::Cord(detail.value()));
    }
  }
  return result;
}

std::optional<google::rpc::ErrorInfo> ErrorInfoOf(const absl::Status& status) {
  return DetailOf<google::rpc::ErrorInfo>(status);
}

std::optional<absl::Duration> RetryDelayOf(const absl::Status& status) {
  const auto retry = DetailOf<google::rpc::RetryInfo>(status);
  if (!retry) return std::nullopt;
  return absl::Nanoseconds(
      google::protobuf::util::TimeUtil::DurationToNanoseconds(retry->retry_delay()));
}

EgressClient::EgressClient(ClientOptions options) : options_(std::move(options)) {
  auto egress = MakeChannel(options_.target, options_.tls, options_.channel_args, /*balance=*/true);
  auto admin = MakeChannel(options_.admin_target, options_.admin_tls, grpc::ChannelArguments(),
                           /*balance=*/false);
  if (!egress.ok()) {
    setup_ = egress.status();
  } else if (!admin.ok()) {
    setup_ = absl::Status(admin.status().code(), absl::StrCat("admin: ", admin.status().message()));
  }
  // When setup failed, stubs on a plaintext channel stand in; no call reaches them.
  const auto plaintext = [](const std::string& target) {
    return grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  };
  egress_ = v1::Egress::NewStub(egress.ok() ? *egress : plaintext(options_.target));
  admin_ = v1::TransportAdmin::NewStub(admin.ok() ? *admin : plaintext(options_.admin_target));
}

absl::StatusOr<std::unique_ptr<EgressClient>> EgressClient::Create(ClientOptions options) {
  auto client = std::make_unique<EgressClient>(std::move(options));
  if (!client->setup_.ok()) return client->setup_;
  return client;
}

absl::Time EgressClient::Deadline(absl::Duration timeout) const {
  const absl::Duration budget = timeout > absl::ZeroDuration() ? timeout : options_.default_timeout;
  return absl::Now() + budget;
}

std::unique_ptr<grpc::ClientContext> EgressClient::Context(absl::Time deadline) const {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(absl::ToChronoTime(deadline));
  return context;
}

std::unique_ptr<grpc::ClientContext> EgressClient::FetchContext(absl::Time deadline) const {
  auto context = Context(deadline);
  for (const auto& [key, value] : options_.metadata) context->AddMetadata(key, value);
  return context;
}

std::unique_ptr<grpc::ClientContext> EgressClient::AdminContext() const {
  auto context = Context(Deadline(absl::ZeroDuration()));
  if (!options_.admin_token.empty()) {
    context->AddMetadata("authorization", absl::StrCat("Bearer ", options_.admin_token));
  }
  return context;
}

v1::FetchRequest EgressClient::MakeRequest(absl::string_view url, const FetchOptions& options) {
  v1::FetchRequest request;
  request.set_url(std::string(url));
  request.set_method(options.method);
  for (const auto& [name, value] : options.headers) {
    v1::Header* header = request.add_headers();
    header->set_name(name);
    // A proto3 string must be UTF-8; other bytes (e.g. Latin-1) go as they are.
    if (google::protobuf::internal::IsStructurallyValidUTF8(value.data(),
                                                          static_cast<int>(value.size()))) {
      header->set_value(value);
    } else {
      header->set_value_bytes(value);
    }
  }
  request.set_body(options.body);
  switch (options.body_mode) {
    case BodyMode::kFull: request.set_body_mode(v1::BODY_MODE_FULL); break;
    case BodyMode::kHeadOnly: request.set_body_mode(v1::BODY_MODE_NONE); break;
    case BodyMode::kPrefix: request.set_body_mode(v1::BODY_MODE_PREFIX); break;
  }
  request.set_max_body_bytes(options.max_body_bytes);
  if (options.timeout > absl::ZeroDuration()) {
    *request.mutable_timeout() = google::protobuf::util::TimeUtil::NanosecondsToDuration(
        absl::ToInt64Nanoseconds(options.timeout));
  }
  request.set_follow_redirects(options.follow_redirects);
  return request;
}

namespace {

// What a stopping egressd does to a fetch sent before its GOAWAY reached the channel:
// refuses it (UNAVAILABLE, reason SHUTTING_DOWN: nothing went upstream), or, for one that
// arrives once gRPC's shutdown has begun, cancels it (CANCELLED, which the caller did not
// ask for; then it may have gone upstream, so only a request safe to repeat goes again).
bool IsShutdownRefusal(const absl::Status& status, absl::string_view method) {
  if (status.code() == absl::StatusCode::kCancelled) {
    return method.empty() || method == "GET" || method == "HEAD" || method == "OPTIONS" ||
           method == "TRACE";
  }
  if (status.code() != absl::StatusCode::kUnavailable) return false;
  const auto info = ErrorInfoOf(status);
  return info && info->reason() == "SHUTTING_DOWN";
}

}  // namespace

absl::StatusOr<v1::FetchResponse> EgressClient::Fetch(absl::string_view url,
                                                      const FetchOptions& options) const {
  if (!setup_.ok()) return setup_;
  const v1::FetchRequest request = MakeRequest(url, options);
  const absl::Time deadline = Deadline(options.timeout);
  for (int attempt = 0;; ++attempt) {
    auto context = FetchContext(deadline);
    v1::FetchResponse response;
    const grpc::Status status = egress_->Fetch(context.get(), request, &response);
    if (status.ok()) return response;
    absl::Status failure = FromGrpcStatus(status);
    if (!RetryRefusal(failure, options.method, attempt, deadline)) return failure;
  }
}

absl::StatusOr<v1::FetchResponse> EgressClient::FetchStream(
    absl::string_view url, const FetchOptions& options,
    const std::function<bool(absl::string_view chunk)>& on_body) const {
  if (!setup_.ok()) return setup_;
  const v1::FetchRequest request = MakeRequest(url, options);
  const absl::Time deadline = Deadline(options.timeout);
  for (int attempt = 0;; ++attempt) {
    auto context = FetchContext(deadline);
    auto reader = egress_->FetchStream(context.get(), request);
    v1::FetchResponse head;
    v1::FetchChunk chunk;
    bool stopped = false;
    bool read_any = false;
    while (!stopped && reader->Read(&chunk)) {
      read_any = true;
      if (chunk.has_head()) {
        head = chunk.head();
      } else if (!on_body(chunk.body())) {
        stopped = true;
        context->TryCancel();  // egressd drains what is left
      }
    }
    const grpc::Status status = reader->Finish();
    if (status.ok() || (stopped && status.error_code() == grpc::StatusCode::CANCELLED)) {
      return head;
    }
    absl::Status failure = FromGrpcStatus(status);
    // A refusal comes before any chunk; after one, nothing is sent again.
    if (read_any || stopped || !RetryRefusal(failure, options.method, attempt, deadline)) {
      return failure;
    }
  }
}

bool EgressClient::RetryRefusal(const absl::Status& failure, absl::string_view method,
                                int attempt, absl::Time deadline) const {
  if (attempt >= options_.shutdown_retries || !IsShutdownRefusal(failure, method)) return false;
  // The first retry goes at once (round_robin hands it to the next replica); later ones
  // give the refusing replica's GOAWAY a moment to reach the channel.
  const absl::Duration pause = absl::Milliseconds(10) * attempt;
  if (absl::Now() + pause >= deadline) return false;
  absl::SleepFor(pause);
  return true;
}

absl::StatusOr<v1::Config> EgressClient::GetConfig() const {
  if (!setup_.ok()) return setup_;
  auto context = AdminContext();
  v1::Config config;
  const grpc::Status status = admin_->GetConfig(context.get(), v1::GetConfigRequest(), &config);
  if (!status.ok()) return FromGrpcStatus(status);
  return config;
}

absl::StatusOr<v1::Config> EgressClient::UpdateConfig(const v1::Config& config) const {
  if (!setup_.ok()) return setup_;
  auto context = AdminContext();
  v1::UpdateConfigRequest request;
  *request.mutable_config() = config;
  v1::Config in_force;
  const grpc::Status status = admin_->UpdateConfig(context.get(), request, &in_force);
  if (!status.ok()) return FromGrpcStatus(status);
  return in_force;
}

absl::StatusOr<v1::PoolStats> EgressClient::GetPoolStats() const {
  if (!setup_.ok()) return setup_;
  auto context = AdminContext();
  v1::PoolStats stats;
  const grpc::Status status =
      admin_->GetPoolStats(context.get(), v1::GetPoolStatsRequest(), &stats);
  if (!status.ok()) return FromGrpcStatus(status);
  return stats;
}

absl::StatusOr<v1::DryRunConfigResponse> EgressClient::DryRunConfig(const v1::Config& config) const {
  if (!setup_.ok()) return setup_;
  auto context = AdminContext();
  v1::DryRunConfigRequest request;
  *request.mutable_config() = config;
  v1::DryRunConfigResponse answer;
  const grpc::Status status = admin_->DryRunConfig(context.get(), request, &answer);
  if (!status.ok()) return FromGrpcStatus(status);
  return answer;
}

}  // namespace egress::client
