#include "service/config_reloader.h"

#include <fstream>
#include <iostream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace egress {

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read \"", path, "\""));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

ConfigReloader::ConfigReloader(EgressServer& server, std::string path,
                               std::string applied_contents, absl::Duration period)
    : server_(server),
      path_(std::move(path)),
      period_(period),
      seen_contents_(std::move(applied_contents)),
      watcher_([this] { Watch(); }) {}

ConfigReloader::~ConfigReloader() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  watcher_.join();
}

absl::Status ConfigReloader::Reload() {
  auto contents = ReadWholeFile(path_);
  if (!contents.ok()) return contents.status();
  {
    std::lock_guard<std::mutex> lock(mu_);
    seen_contents_ = *contents;
  }
  return Apply(*contents);
}

absl::Status ConfigReloader::Apply(const std::string& contents) {
  auto config = ParseConfigText(contents, path_);
  absl::Status status = config.status();
  if (config.ok()) status = server_.ApplyConfig(*config).status();
  if (status.ok()) {
    std::cout << "egressd: applied config file " << path_ << std::endl;
  } else {
    std::cout << "egressd: rejected config file " << path_ << " (the config in force stays): "
              << status.message() << std::endl;
  }
  return status;
}

void ConfigReloader::Watch() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!wake_.wait_for(lock, absl::ToChronoNanoseconds(period_), [this] { return stopping_; })) {
    lock.unlock();
    auto contents = ReadWholeFile(path_);
    lock.lock();
    if (!contents.ok() || *contents == seen_contents_) continue;
    seen_contents_ = *contents;
    lock.unlock();
    Apply(*contents).IgnoreError();  // logged in Apply; the old config stays
    lock.lock();
  }
}

}  // namespace egress
