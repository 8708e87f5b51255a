// egressctl: egressd from the command line, for people (readable output) and scripts
// (--json).
//
//   egressctl fetch URL [--head-only | --prefix=N] [-H 'Name: value' ...] [--method=M]
//   egressctl config get
//   egressctl config set FILE      (a text-format egress.v1.Config, as --config reads)
//   egressctl config dry-run FILE  (what FILE's policy would newly deny or allow of the
//                                   recent fetches; nothing is applied)
//   egressctl pools
//
// --target and --admin name egressd's gRPC and admin addresses. When egressd serves TLS
// or guards its admin service, --tls (with --ca for a private CA, --cert and --key for
// mTLS) and --token-file (the file egressd's --admin_token_file reads) reach it;
// --caller names the caller in the metadata key egressd's policy.caller_header trusts.
// Exit status: 0 done, 1 the call failed (the gRPC code, egressd's message and its
// ErrorInfo reason and metadata on stderr; with --json also as JSON on stdout), 2 bad
// usage.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "client/egress_client.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/time_util.h"

ABSL_FLAG(std::string, target, "127.0.0.1:50051", "egressd's gRPC address (--grpc_listen)");
ABSL_FLAG(std::string, admin, "127.0.0.1:50052", "egressd's admin address (--admin_listen)");
ABSL_FLAG(bool, json, false, "print the answer as JSON (protobuf's JSON mapping)");
ABSL_FLAG(absl::Duration, timeout, absl::Seconds(30), "deadline of the call");
ABSL_FLAG(bool, head_only, false, "fetch: status and headers only (also --head-only)");
ABSL_FLAG(uint64_t, prefix, 0, "fetch: the first N body bytes only");
ABSL_FLAG(std::string, method, "", "fetch: the HTTP method (default GET)");
ABSL_FLAG(bool, tls, false, "TLS to egressd (implied by --ca, --cert, --key)");
ABSL_FLAG(std::string, ca, "", "PEM CA egressd's certificate must chain to (default: the system's)");
ABSL_FLAG(std::string, cert, "", "PEM client certificate, for mTLS (with --key)");
ABSL_FLAG(std::string, key, "", "PEM private key of --cert");
ABSL_FLAG(std::string, tls_server_name, "",
          "the name egressd's certificate carries, when not the target's host");
ABSL_FLAG(std::string, token_file, "",
          "file with the admin bearer token (egressd's --admin_token_file; also --token-file)");
ABSL_FLAG(std::string, caller, "", "fetch: the caller identity, sent in --caller_header");
ABSL_FLAG(std::string, caller_header, "x-egress-caller",
          "fetch: the metadata key of --caller (egressd's policy.caller_header)");

namespace {

namespace v1 = egress::v1;
using google::protobuf::util::TimeUtil;

constexpr const char* kUsage =
    "usage: egressctl [--target=HOST:PORT] [--admin=HOST:PORT] [--json]\n"
    "                 [--tls] [--ca=PEM] [--cert=PEM --key=PEM] [--tls_server_name=NAME]\n"
    "                 [--token-file=FILE] [--caller=ID [--caller_header=KEY]] COMMAND\n"
    "  fetch URL [--head-only | --prefix=N] [-H 'Name: value' ...] [--method=M]\n"
    "  config get\n"
    "  config set FILE\n"
    "  config dry-run FILE\n"
    "  pools\n";

int Usage(const std::string& problem) {
  std::cerr << "egressctl: " << problem << "\n" << kUsage;
  return 2;
}

std::string Json(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.always_print_primitive_fields = true;
  std::string json;
  (void)google::protobuf::util::MessageToJsonString(message, &json, options);  // our own types
  return json;
}

// A failed call: on stderr the code, egressd's message and, when egressd said why, the
// ErrorInfo reason and metadata and the retry delay, e.g. "PERMISSION_DENIED: egress
// policy denies ... [POLICY_DENIED host=::1 rule=...]". With --json, the same on stdout:
// {"error": {"code", "message", "reason", "domain", "metadata", "retryDelay"}}.
int Failed(const absl::Status& status) {
  google::protobuf::Struct error;
  auto& fields = *error.mutable_fields();
  fields["code"].set_string_value(absl::StatusCodeToString(status.code()));
  fields["message"].set_string_value(std::string(status.message()));
  std::string why;
  if (const auto info = egress::client::ErrorInfoOf(status)) {
    fields["reason"].set_string_value(info->reason());
    fields["domain"].set_string_value(info->domain());
    auto& metadata = *fields["metadata"].mutable_struct_value()->mutable_fields();
    // In key order: a protobuf map's own order is unspecified.
    const std::map<std::string, std::string> sorted(info->metadata().begin(),
                                                     info->metadata().end());
    why = absl::StrCat(" [", info->reason());
    for (const auto& [key, value] : sorted) {
      metadata[key].set_string_value(value);
      absl::StrAppend(&why, " ", key, "=", value);
    }
    absl::StrAppend(&why, "]");
  }
  if (const auto delay = egress::client::RetryDelayOf(status)) {
    fields["retryDelay"].set_string_value(
        TimeUtil::ToString(TimeUtil::NanosecondsToDuration(absl::ToInt64Nanoseconds(*delay))));
    absl::StrAppend(&why, " (retry after ", absl::FormatDuration(*delay), ")");
  }
  std::cerr << "egressctl: " << absl::StatusCodeToString(status.code()) << ": "
            << status.message() << why << "\n";
  if (absl::GetFlag(FLAGS_json)) {
    google::protobuf::Struct wrapped;
    *(*wrapped.mutable_fields())["error"].mutable_struct_value() = std::move(error);
    std::cout << Json(wrapped);
  }
  return 1;
}

std::string Ms(const google::protobuf::Duration& duration) {
  return absl::StrFormat("%.1f ms", TimeUtil::DurationToNanoseconds(duration) / 1e6);
}

int Fetch(const egress::client::EgressClient& client, const std::string& url,
          const std::vector<std::pair<std::string, std::string>>& headers) {
  egress::client::FetchOptions options;
  options.method = absl::GetFlag(FLAGS_method);
  options.headers = headers;
  options.timeout = absl::GetFlag(FLAGS_timeout);
  if (absl::GetFlag(FLAGS_head_only) && absl::GetFlag(FLAGS_prefix) > 0) {
    return Usage("--head-only and --prefix exclude each other");
  }
  if (absl::GetFlag(FLAGS_head_only)) options.body_mode = egress::client::BodyMode::kHeadOnly;
  if (absl::GetFlag(FLAGS_prefix) > 0) {
    options.body_mode = egress::client::BodyMode::kPrefix;
    options.max_body_bytes = absl::GetFlag(FLAGS_prefix);
  }
  auto response = client.Fetch(url, options);
  if (!response.ok()) return Failed(response.status());
  if (absl::GetFlag(FLAGS_json)) {
    std::cout << Json(*response);
    return 0;
  }
  std::cout << "HTTP " << response->status_code() << "\n";
  for (const auto& header : response->headers()) {
    std::cout << header.name() << ": " << header.value() << "\n";
  }
  std::cout << "\n" << response->body();
  if (response->body_truncated()) std::cout << "\n[body truncated]";
  const auto& connection = response->connection();
  std::cerr << absl::StrCat("connection ", connection.connection_id(), " to ",
                            connection.remote_address(),
                            connection.reused() ? " (reused)" : " (new)",
                            "; first byte after ", Ms(response->timing().time_to_first_byte()),
                            ", total ", Ms(response->timing().total()), "\n");
  return 0;
}

// Reads a text-format egress.v1.Config; 0, or 2 after a usage message.
int ReadConfigFile(const std::string& path, v1::Config* config) {
  std::ifstream file(path);
  if (!file) return Usage(absl::StrCat("cannot read ", path));
  std::stringstream text;
  text << file.rdbuf();
  if (!google::protobuf::TextFormat::ParseFromString(text.str(), config)) {
    return Usage(absl::StrCat(path, " is not a text-format egress.v1.Config"));
  }
  return 0;
}

void PrintChanges(absl::string_view title,
                  const google::protobuf::RepeatedPtrField<v1::PolicyChange>& changes) {
  std::cout << title << ": " << changes.size() << "\n";
  if (changes.empty()) return;
  std::cout << absl::StrFormat("  %-24s %-40s %7s  %s\n", "caller", "origin", "fetches",
                               "rule (was)");
  for (const auto& change : changes) {
    std::cout << absl::StrFormat("  %-24s %-40s %7d  %s (was %s)\n",
                                 change.caller().empty() ? "-" : change.caller(),
                                 change.origin(), change.fetches(), change.rule(),
                                 change.previous_rule());
  }
}

int DryRun(const egress::client::EgressClient& client, const std::string& path) {
  v1::Config proposed;
  if (int usage = ReadConfigFile(path, &proposed); usage != 0) return usage;
  auto answer = client.DryRunConfig(proposed);
  if (!answer.ok()) return Failed(answer.status());
  if (absl::GetFlag(FLAGS_json)) {
    std::cout << Json(*answer);
    return 0;
  }
  std::cout << "replayed " << answer->decisions_replayed() << " recent policy decisions\n";
  PrintChanges("newly denied", answer->newly_denied());
  PrintChanges("newly allowed", answer->newly_allowed());
  for (const auto& [what, fetches] :
       {std::pair{"denied", answer->newly_denied_fetches_omitted()},
        std::pair{"allowed", answer->newly_allowed_fetches_omitted()}}) {
    if (fetches > 0) std::cout << "(and " << fetches << " more fetches newly " << what << ")\n";
  }
  return 0;
}

int Config(const egress::client::EgressClient& client, const std::vector<std::string>& args) {
  absl::StatusOr<v1::Config> config;
  if (args.size() == 2 && args[0] == "dry-run") return DryRun(client, args[1]);
  if (args.size() == 1 && args[0] == "get") {
    config = client.GetConfig();
  } else if (args.size() == 2 && args[0] == "set") {
    v1::Config wanted;
    if (int usage = ReadConfigFile(args[1], &wanted); usage != 0) return usage;
    config = client.UpdateConfig(wanted);
  } else {
    return Usage("config takes get, set FILE or dry-run FILE");
  }
  if (!config.ok()) return Failed(config.status());
  if (absl::GetFlag(FLAGS_json)) {
    std::cout << Json(*config);
  } else {
    std::string text;
    google::protobuf::TextFormat::PrintToString(*config, &text);
    std::cout << text;
  }
  return 0;
}

int Pools(const egress::client::EgressClient& client) {
  auto stats = client.GetPoolStats();
  if (!stats.ok()) return Failed(stats.status());
  if (absl::GetFlag(FLAGS_json)) {
    std::cout << Json(*stats);
    return 0;
  }
  std::cout << absl::StrFormat("%-40s %6s %6s %8s %10s %8s %8s %9s %7s %s\n", "origin", "idle",
                               "active", "draining", "connecting", "opened", "reused", "breaker",
                               "streams", "owner");
  for (const auto& o : stats->origins()) {
    const std::string breaker = absl::AsciiStrToLower(
        absl::StripPrefix(v1::CircuitBreakerState_Name(o.circuit_breaker()), "CIRCUIT_BREAKER_"));
    std::cout << absl::StrFormat("%-40s %6d %6d %8d %10d %8d %8d %9s %7d %s\n", o.origin(),
                                 o.idle(), o.active(), o.draining(), o.connecting(), o.opened(),
                                 o.reused(), breaker, o.streams(),
                                 o.owner().empty() ? "-" : o.owner());
  }
  return 0;
}

// The TLS, token and caller flags into `options`; 0, or 2 after a usage message.
int Secure(egress::client::ClientOptions& options) {
  egress::client::TlsOptions tls;
  tls.enabled = absl::GetFlag(FLAGS_tls);
  tls.ca_file = absl::GetFlag(FLAGS_ca);
  tls.cert_file = absl::GetFlag(FLAGS_cert);
  tls.key_file = absl::GetFlag(FLAGS_key);
  tls.server_name = absl::GetFlag(FLAGS_tls_server_name);
  if (tls.cert_file.empty() != tls.key_file.empty()) return Usage("--cert and --key go together");
  // One command talks to one listener: the same flags serve either.
  options.tls = tls;
  options.admin_tls = tls;
  const std::string token_file = absl::GetFlag(FLAGS_token_file);
  if (!token_file.empty()) {
    std::ifstream file(token_file);
    std::stringstream token;
    token << file.rdbuf();
    options.admin_token = std::string(absl::StripAsciiWhitespace(token.str()));
    if (!file || options.admin_token.empty()) {
      return Usage(absl::StrCat("--token-file: cannot read a token from ", token_file));
    }
  }
  if (!absl::GetFlag(FLAGS_caller).empty()) {
    const std::string key = absl::AsciiStrToLower(absl::GetFlag(FLAGS_caller_header));
    if (key.empty()) return Usage("--caller needs --caller_header");
    options.metadata.emplace_back(key, absl::GetFlag(FLAGS_caller));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // -H 'Name: value' may repeat, and --head-only is spelled as in curl; Abseil's flags
  // take neither, so both are picked out first.
  std::vector<std::pair<std::string, std::string>> headers;
  std::vector<char*> rest = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    std::string header;
    if (arg == "-H" && i + 1 < argc) {
      header = argv[++i];
    } else if (absl::StartsWith(arg, "-H") && arg.size() > 2) {
      header = arg.substr(2);
    } else {
      static std::string head_only = "--head_only";
      if (arg == "--head-only") {
        rest.push_back(head_only.data());
      } else if (absl::StartsWith(arg, "--token-file")) {
        argv[i][7] = '_';  // --token_file, as Abseil spells it
        rest.push_back(argv[i]);
      } else {
        rest.push_back(argv[i]);
      }
      continue;
    }
    const size_t colon = header.find(':');
    if (colon == std::string::npos) return Usage(absl::StrCat("-H '", header, "': no colon"));
    headers.emplace_back(header.substr(0, colon),
                         std::string(absl::StripLeadingAsciiWhitespace(header.substr(colon + 1))));
  }
  absl::SetProgramUsageMessage(kUsage);
  std::vector<char*> positional = absl::ParseCommandLine(static_cast<int>(rest.size()), rest.data());
  std::vector<std::string> args(positional.begin() + 1, positional.end());
  if (args.empty()) return Usage("no command");

  egress::client::ClientOptions options;
  options.target = absl::GetFlag(FLAGS_target);
  options.admin_target = absl::GetFlag(FLAGS_admin);
  options.default_timeout = absl::GetFlag(FLAGS_timeout);
  if (auto status = Secure(options); status != 0) return status;
  auto client = egress::client::EgressClient::Create(options);
  if (!client.ok()) return Usage(std::string(client.status().message()));

  const std::string command = args[0];
  args.erase(args.begin());
  if (command == "fetch" && args.size() == 1) return Fetch(**client, args[0], headers);
  if (command == "config") return Config(**client, args);
  if (command == "pools" && args.empty()) return Pools(**client);
  return Usage(absl::StrCat("unknown command or arguments: ", command));
}
