#include "service/config/config.h"

#include <optional>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "service/base/log_text.h"

namespace egress {
namespace {

// Collects the first parse error with its position and the line it is on, so that
// the message names the field even when the parser's own words do not.
// The first error, with the offending line quoted. The one place a config's text reaches
// an error message (and so stderr, the admin caller, the reloader's log): protobuf's
// message (which quotes the token) and the line are each bounded and escaped
// (service/base/log_text.h), however long the line and whatever bytes it holds.
class ParseErrors : public google::protobuf::io::ErrorCollector {
 public:
  explicit ParseErrors(absl::string_view text) : text_(text) {}
  void AddError(int line, int column, const std::string& message) override {
    if (!first_.empty()) return;
    first_ = absl::StrCat("line ", line + 1, ":", column + 1, ": ",
                          OneLogLine(message, kMaxQuotedBytes));
    if (auto quoted = Line(line)) {
      absl::StrAppend(&first_, " (in \"", QuoteForLog(absl::StripAsciiWhitespace(*quoted)), "\")");
    }
  }
  const std::string& first() const { return first_; }

 private:
  // Line `number` (from 0) of the text, without copying the text.
  std::optional<absl::string_view> Line(int number) const {
    if (number < 0) return std::nullopt;
    size_t start = 0;
    for (int i = 0; i < number; ++i) {
      start = text_.find('\n', start);
      if (start == absl::string_view::npos) return std::nullopt;
      ++start;
    }
    return text_.substr(start, text_.find('\n', start) - start);
  }

  const absl::string_view text_;
  std::string first_;
};

}  // namespace

absl::StatusOr<egress::v1::Config> ParseConfigText(const std::string& text,
                                                   const std::string& source) {
  egress::v1::Config proto;
  ParseErrors errors(text);
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(text, &proto)) {
    return absl::InvalidArgumentError(absl::StrCat("config \"", source, "\": ", errors.first()));
  }
  return proto;
}

absl::StatusOr<ServiceConfig> LoadConfigText(const std::string& text, const std::string& source) {
  auto proto = ParseConfigText(text, source);
  if (!proto.ok()) return proto.status();
  auto config = BuildConfig(*proto);
  if (!config.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("config \"", source, "\": ", config.status().message()));
  }
  return config;
}

std::vector<std::string> ConfigWarnings(const ServiceConfig& config) {
  std::vector<std::string> warnings;
  const auto& policy = config.proto.policy();
  if (!policy.caller_header().empty() && policy.caller_header_trusted_peers().empty()) {
    warnings.push_back(absl::StrCat(
        "policy.caller_header \"", policy.caller_header(),
        "\" is set but policy.caller_header_trusted_peers is empty: the header is ignored "
        "from every peer; list the mesh proxies' addresses or identities"));
  }
  if (policy.callers_size() > 0 && policy.unknown_callers() != v1::UNKNOWN_CALLERS_DENY) {
    warnings.push_back(
        "policy.callers is set and policy.unknown_callers is DEFAULT_POLICY: a caller with no "
        "identity or no rule gets the whole policy; set unknown_callers: UNKNOWN_CALLERS_DENY "
        "so that only listed callers may fetch");
  }
  return warnings;
}

std::string DescribeConfig(const ServiceConfig& config) {
  std::string text;
  google::protobuf::TextFormat::Printer printer;
  printer.SetSingleLineMode(true);
  printer.PrintToString(config.proto, &text);
  return text;
}

}  // namespace egress
