#include "service/admin_service.h"

#include <openssl/crypto.h>
#include <sys/stat.h>

#include <algorithm>
#include <iostream>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/util/message_differencer.h"
#include "grpc/grpc_security_constants.h"
#include "service/config_reloader.h"
#include "service/proto_time.h"
#include "service/status_mapping.h"
#include "service/transport/address_policy.h"

namespace egress {
namespace {

using google::protobuf::util::MessageDifferencer;

// Every admin call is answered at once from memory: no I/O, so finishing inside the
// method is the callback API's intended use.
grpc::ServerUnaryReactor* Answer(grpc::CallbackServerContext* context, grpc::Status status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(std::move(status));
  return reactor;
}

// The names an mTLS client certificate carries: URI SANs ("spiffe://..."), then DNS SANs.
std::vector<std::string> CertificateNames(const grpc::CallbackServerContext& context) {
  std::vector<std::string> names;
  const auto auth = context.auth_context();
  if (!auth || !auth->IsPeerAuthenticated()) return names;
  for (const char* property : {GRPC_PEER_URI_PROPERTY_NAME, GRPC_PEER_DNS_PROPERTY_NAME}) {
    for (const auto& value : auth->FindPropertyValues(property)) {
      names.emplace_back(value.data(), value.size());
    }
  }
  return names;
}

// One line on stdout per admin call: who, what, and how it ended.
void LogCall(absl::string_view method, const grpc::CallbackServerContext& context,
             absl::string_view outcome) {
  const std::vector<std::string> names = CertificateNames(context);
  std::cout << absl::StrCat("egressd: admin ", method, " from ", context.peer(), " identity ",
                            names.empty() ? "-" : absl::StrJoin(names, ","), ": ", outcome)
            << std::endl;
}

std::string Failed(absl::string_view what, const grpc::Status& status) {
  return absl::StrCat(what, " (", absl::StatusCodeToString(
                                      static_cast<absl::StatusCode>(status.error_code())),
                      ": ", status.error_message(), ")");
}

}  // namespace

std::vector<std::string> ConfigChanges(const egress::v1::Config& before,
                                       const egress::v1::Config& after) {
  std::string report;
  {
    google::protobuf::io::StringOutputStream output(&report);
    MessageDifferencer::StreamReporter reporter(&output);
    reporter.SetMessages(before, after);
    MessageDifferencer differencer;
    differencer.ReportDifferencesTo(&reporter);
    differencer.Compare(before, after);
  }  // the reporter writes all of its report only when destroyed, after the differencer
  return absl::StrSplit(report, '\n', absl::SkipEmpty());
}

absl::StatusOr<std::string> TokenFile::Current() {
  struct stat info;
  if (stat(path_.c_str(), &info) != 0) {
    return absl::UnavailableError(absl::StrCat("--admin_token_file \"", path_,
                                               "\" cannot be read; no admin call is accepted "
                                               "until it holds the token"));
  }
  std::lock_guard<std::mutex> lock(mu_);
  const bool same = info.st_dev == version_.device && info.st_ino == version_.inode &&
                    info.st_size == version_.size &&
                    info.st_mtim.tv_sec == version_.mtime.tv_sec &&
                    info.st_mtim.tv_nsec == version_.mtime.tv_nsec;
  if (!same) {
    version_ = {info.st_dev, info.st_ino, info.st_size, info.st_mtim};
    auto text = ReadWholeFile(path_);
    std::string token(absl::StripAsciiWhitespace(text.ok() ? *text : ""));
    if (token.empty()) {
      token_ = absl::UnavailableError(absl::StrCat("--admin_token_file \"", path_,
                                                   "\" is empty or unreadable; no admin call "
                                                   "is accepted until it holds the token"));
    } else {
      token_ = std::move(token);
    }
  }
  return token_;
}

AdminService::AdminService(EgressServer& server, AdminAccess access)
    : server_(server), access_(std::move(access)) {
  if (!access_.bearer_token_file.empty()) {
    token_file_ = std::make_unique<TokenFile>(access_.bearer_token_file);
  }
}

grpc::Status AdminService::Authorize(const grpc::CallbackServerContext& context) {
  if (!access_.identities.empty()) {
    const std::vector<std::string> names = CertificateNames(context);
    const bool listed = std::any_of(names.begin(), names.end(), [&](const std::string& name) {
      return std::find(access_.identities.begin(), access_.identities.end(), name) !=
             access_.identities.end();
    });
    if (!listed) {
      return grpc::Status(
          grpc::StatusCode::PERMISSION_DENIED,
          absl::StrCat("the admin service accepts only the certificates --admin_identities "
                       "lists; this one names ",
                       names.empty() ? "no URI or DNS SAN" : absl::StrJoin(names, ", ")));
    }
  }
  std::string expected_token = access_.bearer_token;
  if (token_file_) {
    auto token = token_file_->Current();
    if (!token.ok()) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, std::string(token.status().message()));
    }
    expected_token = *std::move(token);
  }
  if (expected_token.empty()) return grpc::Status::OK;
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find("authorization");
  const std::string expected = absl::StrCat("Bearer ", expected_token);
  if (it == metadata.end() || it->second.size() != expected.size() ||
      CRYPTO_memcmp(it->second.data(), expected.data(), expected.size()) != 0) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "the admin service needs \"authorization: Bearer <token>\" metadata "
                        "with the token in egressd's --admin_token_file");
  }
  return grpc::Status::OK;
}

namespace {

// Whether CIDRs of one family, merged, cover every address of it: one "0.0.0.0/0", or
// two "/1" halves, or any other tiling. Entries that are no CIDR are passed over.
bool CoverEveryAddress(const google::protobuf::RepeatedPtrField<std::string>& cidrs, bool v4) {
  using Address = unsigned __int128;
  const int bits = v4 ? 32 : 128;
  std::vector<std::pair<Address, Address>> ranges;  // first, last
  for (const std::string& text : cidrs) {
    auto cidr = transport::Cidr::Parse(text);
    if (!cidr.ok() || cidr->network.is_v4() != v4) continue;
    Address first = 0;
    if (v4) {
      first = cidr->network.to_v4().to_uint();
    } else {
      for (const unsigned char byte : cidr->network.to_v6().to_bytes()) first = first << 8 | byte;
    }
    const int host_bits = bits - cidr->prefix_length;
    const Address span = host_bits >= 128 ? ~Address{0} : (Address{1} << host_bits) - 1;
    first &= ~span;
    ranges.emplace_back(first, first + span);
  }
  std::sort(ranges.begin(), ranges.end());
  const Address last = v4 ? Address{0xffffffffu} : ~Address{0};
  Address next = 0;  // the first address not yet covered
  for (const auto& [from, to] : ranges) {
    if (from > next) return false;
    if (to >= next) {
      if (to == last) return true;
      next = to + 1;
    }
  }
  return false;
}

}  // namespace

grpc::Status AdminService::CheckPolicyWidening(const egress::v1::Config& next) const {
  if (access_.allow_policy_off) return grpc::Status::OK;
  const egress::v1::PolicyConfig& now = server_.config().Get()->proto.policy();
  const egress::v1::PolicyConfig& policy = next.policy();
  constexpr absl::string_view kHow =
      "; egressd accepts that over gRPC only when started with --admin_allow_policy_off "
      "(or put it in the --config file)";
  if (policy.disabled() && !now.disabled()) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        absl::StrCat("policy.disabled turns the egress policy off", kHow));
  }
  for (const bool v4 : {true, false}) {
    if (CoverEveryAddress(policy.allow_cidrs(), v4) && !CoverEveryAddress(now.allow_cidrs(), v4)) {
      return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                          absl::StrCat("policy.allow_cidrs together allow every ",
                                       v4 ? "IPv4" : "IPv6", " address", kHow));
    }
    if (CoverEveryAddress(policy.caller_header_trusted_peers(), v4) &&
        !CoverEveryAddress(now.caller_header_trusted_peers(), v4)) {
      return grpc::Status(
          grpc::StatusCode::PERMISSION_DENIED,
          absl::StrCat("policy.caller_header_trusted_peers together trust every ",
                       v4 ? "IPv4" : "IPv6",
                       " peer, so any caller could name itself with policy.caller_header",
                       kHow));
    }
  }
  if (now.unknown_callers() == egress::v1::UNKNOWN_CALLERS_DENY &&
      policy.unknown_callers() != egress::v1::UNKNOWN_CALLERS_DENY) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        absl::StrCat("policy.unknown_callers other than UNKNOWN_CALLERS_DENY "
                                     "lets callers with no identity or no rule use the whole "
                                     "policy",
                                     kHow));
  }
  return grpc::Status::OK;
}

grpc::ServerUnaryReactor* AdminService::GetConfig(grpc::CallbackServerContext* context,
                                                  const egress::v1::GetConfigRequest*,
                                                  egress::v1::Config* response) {
  const grpc::Status status = Authorize(*context);
  LogCall("GetConfig", *context, status.ok() ? "OK" : Failed("denied", status));
  if (!status.ok()) return Answer(context, status);
  *response = server_.config().Get()->proto;
  return Answer(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* AdminService::UpdateConfig(
    grpc::CallbackServerContext* context, const egress::v1::UpdateConfigRequest* request,
    egress::v1::Config* response) {
  grpc::Status status = Authorize(*context);
  if (status.ok()) status = CheckPolicyWidening(request->config());
  if (!status.ok()) {
    LogCall("UpdateConfig", *context, Failed("denied", status));
    return Answer(context, status);
  }
  const egress::v1::Config before = server_.config().Get()->proto;
  auto in_force = server_.ApplyConfig(request->config());
  if (!in_force.ok()) {
    status = ToGrpcStatus(in_force.status());
    LogCall("UpdateConfig", *context, Failed("rejected", status));
    return Answer(context, status);
  }
  const std::vector<std::string> changes = ConfigChanges(before, *in_force);
  LogCall("UpdateConfig", *context,
          absl::StrCat("applied; ", changes.empty() ? "nothing changed" : absl::StrJoin(changes, "; ")));
  *response = *std::move(in_force);
  return Answer(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* AdminService::GetPoolStats(grpc::CallbackServerContext* context,
                                                     const egress::v1::GetPoolStatsRequest*,
                                                     egress::v1::PoolStats* response) {
  const grpc::Status status = Authorize(*context);
  LogCall("GetPoolStats", *context, status.ok() ? "OK" : Failed("denied", status));
  if (!status.ok()) return Answer(context, status);
  for (const auto& stats : server_.transport().PoolStats()) {
    auto* origin = response->add_origins();
    origin->set_origin(stats.origin);
    origin->set_idle(stats.idle);
    origin->set_active(stats.active);
    origin->set_draining(stats.draining);
    origin->set_connecting(stats.connecting);
    origin->set_opened(stats.opened);
    origin->set_reused(stats.reused);
    if (stats.oldest_idle_age > absl::ZeroDuration()) {
      ToProto(stats.oldest_idle_age, origin->mutable_oldest_idle_age());
    }
    origin->set_requests_served(stats.requests_served);
    if (stats.server_hint && stats.server_hint->timeout) {
      ToProto(*stats.server_hint->timeout, origin->mutable_server_keepalive_timeout());
    }
    if (stats.server_hint && stats.server_hint->max) {
      origin->set_server_keepalive_max(*stats.server_hint->max);
    }
  }
  return Answer(context, grpc::Status::OK);
}

}  // namespace egress
