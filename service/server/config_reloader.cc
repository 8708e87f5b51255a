#include "service/server/config_reloader.h"

#include <algorithm>
#include <iostream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "service/base/files.h"
#include "service/base/log_text.h"
#include "service/config/config.h"

namespace egress {

absl::StatusOr<std::string> ReadConfigFile(const std::string& path) {
  auto text = ReadBoundedFile(path, kMaxConfigFileBytes);
  if (!text.ok()) return text.status();
  if (absl::StripAsciiWhitespace(*text).empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config \"", path, "\" is empty; an empty config is never applied (to run on the "
        "built-in defaults, leave out --config)"));
  }
  return text;
}

ConfigReloader::ConfigReloader(EgressServer& server, std::string path,
                               std::string applied_contents, absl::Duration period)
    : server_(server),
      path_(std::move(path)),
      settle_(std::min(period / 2, absl::Milliseconds(200))),
      applied_contents_(std::move(applied_contents)),
      watcher_(period, [this] { Poll(); }) {}

ConfigReloader::~ConfigReloader() = default;

absl::StatusOr<std::string> ConfigReloader::ReadSettled() const {
  auto before = StatFileVersion(path_);
  auto first = ReadConfigFile(path_);
  if (!first.ok()) return first.status();
  absl::SleepFor(settle_);
  auto second = ReadConfigFile(path_);
  if (!second.ok()) return second.status();
  auto after = StatFileVersion(path_);
  if (!before.ok() || !after.ok() || !(*before == *after) || *first != *second) {
    return absl::UnavailableError(absl::StrCat(
        "config \"", path_, "\" is being written; it is read again on the next poll"));
  }
  return first;
}

void ConfigReloader::LogProblem(const std::string& message) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (message == last_problem_) return;
    last_problem_ = message;
  }
  std::cerr << OneLogLine(absl::StrCat("egressd: rejected config file ", path_,
                                    " (the config in force stays): ", message))
            << std::endl;
}

absl::Status ConfigReloader::Reload() {
  auto contents = ReadSettled();
  if (!contents.ok()) {
    std::cerr << OneLogLine(absl::StrCat("egressd: rejected config file ", path_,
                                         " (the config in force stays): ",
                                         contents.status().message()))
              << std::endl;
    return contents.status();
  }
  return Apply(*contents);
}

absl::Status ConfigReloader::Apply(const std::string& contents) {
  auto config = ParseConfigText(contents, path_);
  absl::Status status = config.status();
  if (config.ok()) status = server_.ApplyConfig(*config).status();
  if (!status.ok()) {
    LogProblem(std::string(status.message()));
    return status;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    applied_contents_ = contents;
    last_problem_.clear();
  }
  std::cerr << "egressd: applied config file " << path_ << std::endl;
  return status;
}

// A rejected file is not remembered as seen: it is tried again on every poll until it
// applies (the problem is logged once).
void ConfigReloader::Poll() {
  if (auto quick = ReadConfigFile(path_); quick.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    if (*quick == applied_contents_) {
      last_problem_.clear();
      return;
    }
  }
  auto contents = ReadSettled();
  if (!contents.ok()) return LogProblem(std::string(contents.status().message()));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (*contents == applied_contents_) return;
  }
  Apply(*contents).IgnoreError();  // logged in Apply; the old config stays
}

}  // namespace egress
