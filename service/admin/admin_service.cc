#include "service/admin/admin_service.h"

#include <openssl/crypto.h>

#include <algorithm>
#include <iostream>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/util/message_differencer.h"
#include "service/admin/dry_run.h"
#include "service/base/error_reason.h"
#include "service/config/config.h"
#include "service/config/config_store.h"
#include "service/config/proto_time.h"
#include "service/fetch/certificate_names.h"
#include "service/fetch/status_mapping.h"
#include "service/fleet/membership.h"
#include "service/fleet/rendezvous.h"
#include "service/transport/policy/address_policy.h"
#include "service/transport/transport.h"

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
  const auto auth = context.auth_context();
  if (!auth) return {};
  fetch::CertificateNames certificate = fetch::NamesOf(*auth);
  std::vector<std::string> names = std::move(certificate.uri_sans);
  for (auto& name : certificate.dns_sans) names.push_back(std::move(name));
  return names;
}

// `text` with control characters written as \xNN: a value quoted from a request (a
// config field in an error message, a certificate name) cannot start a line of its own.
std::string OneLine(absl::string_view text) {
  std::string line;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) {
      absl::StrAppend(&line, "\\x", absl::Hex(byte, absl::kZeroPad2));
    } else {
      line += c;
    }
  }
  return line;
}

// One line on stdout per admin call: who, what, and how it ended.
void LogCall(absl::string_view method, const grpc::CallbackServerContext& context,
             absl::string_view outcome) {
  const std::vector<std::string> names = CertificateNames(context);
  std::cerr << OneLine(absl::StrCat("egressd: admin ", method, " from ", context.peer(),
                                    " identity ", names.empty() ? "-" : absl::StrJoin(names, ","),
                                    ": ", outcome))
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
      return ToGrpcStatus(transport::WithReason(
          absl::PermissionDeniedError(absl::StrCat(
              "the admin service accepts only the certificates --admin_identities lists; this "
              "one names ",
              names.empty() ? "no URI or DNS SAN" : absl::StrJoin(names, ", "))),
          "ADMIN_IDENTITY_NOT_ALLOWED"));
    }
  }
  std::string expected_token = access_.bearer_token;
  if (token_file_) {
    auto token = token_file_->Current();  // from memory: the file is read off this thread
    if (!token.ok()) {
      token_file_->CheckSoon();
      return ToGrpcStatus(transport::WithReason(
          absl::UnauthenticatedError(token.status().message()), "ADMIN_TOKEN_UNAVAILABLE"));
    }
    expected_token = *std::move(token);
  }
  if (expected_token.empty()) return grpc::Status::OK;
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find("authorization");
  const std::string expected = absl::StrCat("Bearer ", expected_token);
  if (it == metadata.end() || it->second.size() != expected.size() ||
      CRYPTO_memcmp(it->second.data(), expected.data(), expected.size()) != 0) {
    // Perhaps the token was just rotated: the watcher looks now, for the caller's retry.
    if (token_file_) token_file_->CheckSoon();
    return ToGrpcStatus(transport::WithReason(
        absl::UnauthenticatedError("the admin service needs \"authorization: Bearer <token>\" "
                                   "metadata with the token in egressd's --admin_token_file"),
        "ADMIN_TOKEN_REQUIRED"));
  }
  return grpc::Status::OK;
}

namespace {

using Address = unsigned __int128;

// The first and last address of a network, as numbers within its family.
std::pair<Address, Address> Span(const transport::Cidr& cidr) {
  const bool v4 = cidr.network.is_v4();
  Address first = 0;
  if (v4) {
    first = cidr.network.to_v4().to_uint();
  } else {
    for (const unsigned char byte : cidr.network.to_v6().to_bytes()) first = first << 8 | byte;
  }
  const int host_bits = (v4 ? 32 : 128) - cidr.prefix_length;
  const Address span = host_bits >= 128 ? ~Address{0} : (Address{1} << host_bits) - 1;
  first &= ~span;
  return {first, first + span};
}

// Whether the CIDRs among `texts` of target's family, merged, cover target whole: one
// "0.0.0.0/0", two "/1" halves, or any other tiling. Entries that are no CIDR are
// passed over.
bool Covers(const google::protobuf::RepeatedPtrField<std::string>& texts,
            const transport::Cidr& target) {
  std::vector<std::pair<Address, Address>> ranges;
  for (const std::string& text : texts) {
    auto cidr = transport::Cidr::Parse(text);
    if (cidr.ok() && cidr->network.is_v4() == target.network.is_v4()) {
      ranges.push_back(Span(*cidr));
    }
  }
  std::sort(ranges.begin(), ranges.end());
  const auto [first, last] = Span(target);
  Address next = first;  // the first address of target not yet covered
  for (const auto& [from, to] : ranges) {
    if (to < next) continue;
    if (from > next) return false;
    if (to >= last) return true;
    next = to + 1;
  }
  return false;
}

const transport::Cidr& EveryAddress(bool v4) {
  static const transport::Cidr every_v4 = *transport::Cidr::Parse("0.0.0.0/0");
  static const transport::Cidr every_v6 = *transport::Cidr::Parse("::/0");
  return v4 ? every_v4 : every_v6;
}

// Why allow_cidrs open as much as turning the policy off does, if they do: every range
// the built-in denials hold back in one family, or a whole IPv6 range that embeds
// IPv4 addresses (::ffff:0:0/96 reaches 127.0.0.1 as ::ffff:127.0.0.1).
std::optional<std::string> OpensEverything(const egress::v1::PolicyConfig& policy) {
  const auto& ranges = transport::AddressPolicy::SpecialRanges();
  for (const bool v4 : {true, false}) {
    if (std::all_of(ranges.begin(), ranges.end(), [&](const auto& special) {
          return special.first.network.is_v4() != v4 || Covers(policy.allow_cidrs(), special.first);
        })) {
      return absl::StrCat("policy.allow_cidrs together allow every ", v4 ? "IPv4" : "IPv6",
                          " address the built-in denials hold back (loopback, private, "
                          "link-local, ...)");
    }
  }
  for (const auto& [range, reason] : ranges) {
    if (reason == transport::DenyReason::kIpv4Embedded && Covers(policy.allow_cidrs(), range)) {
      return absl::StrCat("policy.allow_cidrs allow ", range.ToString(),
                          " whole: every IPv4 address in an IPv6 form");
    }
  }
  return std::nullopt;
}

egress::v1::CircuitBreakerState ToProto(transport::BreakerState state) {
  switch (state) {
    case transport::BreakerState::kOpen: return egress::v1::CIRCUIT_BREAKER_OPEN;
    case transport::BreakerState::kHalfOpen: return egress::v1::CIRCUIT_BREAKER_HALF_OPEN;
    case transport::BreakerState::kClosed: break;
  }
  return egress::v1::CIRCUIT_BREAKER_CLOSED;
}

}  // namespace

absl::Status AdminService::CheckPolicyWidening(const egress::v1::Config& in_force,
                                               const egress::v1::Config& next) const {
  if (access_.allow_policy_off) return absl::OkStatus();
  const egress::v1::PolicyConfig& now = in_force.policy();
  const egress::v1::PolicyConfig& policy = next.policy();
  const auto refuse = [](absl::string_view what) {
    return transport::WithReason(
        absl::PermissionDeniedError(
            absl::StrCat(what, "; egressd accepts that over gRPC only when started with "
                               "--admin_allow_policy_off (or put it in the --config file)")),
        "POLICY_WIDENING_REFUSED");
  };
  if (policy.disabled() && !now.disabled()) {
    return refuse("policy.disabled turns the egress policy off");
  }
  if (const auto everything = OpensEverything(policy); everything && !OpensEverything(now)) {
    return refuse(*everything);
  }
  for (const bool v4 : {true, false}) {
    if (Covers(policy.caller_header_trusted_peers(), EveryAddress(v4)) &&
        !Covers(now.caller_header_trusted_peers(), EveryAddress(v4))) {
      return refuse(absl::StrCat("policy.caller_header_trusted_peers together trust every ",
                                 v4 ? "IPv4" : "IPv6",
                                 " peer, so any caller could name itself with "
                                 "policy.caller_header"));
    }
  }
  if (now.unknown_callers() == egress::v1::UNKNOWN_CALLERS_DENY &&
      policy.unknown_callers() != egress::v1::UNKNOWN_CALLERS_DENY) {
    return refuse(
        "policy.unknown_callers other than UNKNOWN_CALLERS_DENY lets callers with no "
        "identity or no rule use the whole policy");
  }
  return absl::OkStatus();
}


AdminService::~AdminService() { std::lock_guard<std::mutex> no_call_left(in_call_mu_); }

grpc::ServerUnaryReactor* AdminService::GetConfig(grpc::CallbackServerContext* context,
                                                  const egress::v1::GetConfigRequest*,
                                                  egress::v1::Config* response) {
  std::lock_guard<std::mutex> in_call(in_call_mu_);
  const grpc::Status status = Authorize(*context);
  LogCall("GetConfig", *context, status.ok() ? "OK" : Failed("denied", status));
  if (!status.ok()) return Answer(context, status);
  *response = server_.config().Get()->proto;
  return Answer(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* AdminService::UpdateConfig(
    grpc::CallbackServerContext* context, const egress::v1::UpdateConfigRequest* request,
    egress::v1::Config* response) {
  std::lock_guard<std::mutex> in_call(in_call_mu_);
  grpc::Status status = Authorize(*context);
  if (!status.ok()) {
    LogCall("UpdateConfig", *context, Failed("denied", status));
    return Answer(context, status);
  }
  // The widening check and the diff see the config this one replaces, under the lock
  // that swaps it: a reload or another call cannot come between.
  egress::v1::Config before;
  auto in_force = server_.ApplyConfig(request->config(), [&](const egress::v1::Config& now) {
    before = now;
    return CheckPolicyWidening(now, request->config());
  });
  if (!in_force.ok()) {
    status = ToGrpcStatus(in_force.status());
    LogCall("UpdateConfig", *context,
            Failed(in_force.status().code() == absl::StatusCode::kPermissionDenied ? "denied"
                                                                                   : "rejected",
                   status));
    return Answer(context, status);
  }
  const std::vector<std::string> changes = ConfigChanges(before, *in_force);
  LogCall("UpdateConfig", *context,
          absl::StrCat("applied; ",
                       changes.empty() ? "nothing changed" : absl::StrJoin(changes, "; ")));
  *response = *std::move(in_force);
  return Answer(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* AdminService::DryRunConfig(
    grpc::CallbackServerContext* context, const egress::v1::DryRunConfigRequest* request,
    egress::v1::DryRunConfigResponse* response) {
  std::lock_guard<std::mutex> in_call(in_call_mu_);
  grpc::Status status = Authorize(*context);
  if (!status.ok()) {
    LogCall("DryRunConfig", *context, Failed("denied", status));
    return Answer(context, status);
  }
  const auto proposed = server_.ValidateConfig(request->config());
  if (!proposed.ok()) {
    status = ToGrpcStatus(proposed.status());
    LogCall("DryRunConfig", *context, Failed("rejected", status));
    return Answer(context, status);
  }
  *response = DryRun(server_.transport().RecentPolicyDecisions(), *proposed->transport.policy);
  LogCall("DryRunConfig", *context,
          absl::StrCat("replayed ", response->decisions_replayed(), " decisions: ",
                       response->newly_denied_size(), " newly denied, ",
                       response->newly_allowed_size(), " newly allowed (by caller and origin)"));
  return Answer(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* AdminService::GetPoolStats(grpc::CallbackServerContext* context,
                                                     const egress::v1::GetPoolStatsRequest*,
                                                     egress::v1::PoolStats* response) {
  std::lock_guard<std::mutex> in_call(in_call_mu_);
  const grpc::Status status = Authorize(*context);
  LogCall("GetPoolStats", *context, status.ok() ? "OK" : Failed("denied", status));
  if (!status.ok()) return Answer(context, status);
  // Breakers by origin, for the pool's origins and then those with no connection.
  absl::flat_hash_map<std::string, transport::BreakerStats> breakers;
  for (auto& breaker : server_.transport().CircuitBreakerStats()) {
    std::string key = breaker.origin;
    breakers.emplace(std::move(key), std::move(breaker));
  }
  const auto add_breaker = [](const transport::BreakerStats* breaker,
                              egress::v1::OriginPoolStats* origin) {
    origin->set_circuit_breaker(breaker ? ToProto(breaker->state)
                                        : egress::v1::CIRCUIT_BREAKER_CLOSED);
    if (!breaker) return;
    origin->set_consecutive_failures(breaker->consecutive_failures);
    if (breaker->open_remaining > absl::ZeroDuration()) {
      ToProto(breaker->open_remaining, origin->mutable_circuit_open_remaining());
    }
    origin->set_last_failure(breaker->last_failure);
  };
  const std::shared_ptr<const fleet::Membership::Members> members = server_.fleet().Current();
  for (const auto& stats : server_.transport().PoolStats()) {
    auto* origin = response->add_origins();
    origin->set_owner(std::string(fleet::OwnerOf(*members, stats.origin)));
    const auto breaker = breakers.find(stats.origin);
    add_breaker(breaker == breakers.end() ? nullptr : &breaker->second, origin);
    if (breaker != breakers.end()) breakers.erase(breaker);
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
    origin->set_streams(static_cast<uint32_t>(stats.streams));
    if (stats.server_hint && stats.server_hint->timeout) {
      ToProto(*stats.server_hint->timeout, origin->mutable_server_keepalive_timeout());
    }
    if (stats.server_hint && stats.server_hint->max) {
      origin->set_server_keepalive_max(*stats.server_hint->max);
    }
  }
  for (const auto& [key, breaker] : breakers) {
    auto* origin = response->add_origins();
    origin->set_origin(key);
    origin->set_owner(std::string(fleet::OwnerOf(*members, key)));
    add_breaker(&breaker, origin);
  }
  return Answer(context, grpc::Status::OK);
}

}  // namespace egress
