#include "service/token_file.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace egress {

TokenFile::TokenFile(std::string path, absl::Duration period)
    : path_(std::move(path)),
      period_(period),
      version_(StatFileVersion(path_).value_or(FileVersion{})),  // before the read
      token_(Read(path_)),
      watcher_([this] { Watch(); }) {}

TokenFile::~TokenFile() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  watcher_.join();
}

absl::StatusOr<std::string> TokenFile::Read(const std::string& path) {
  auto text = ReadBoundedFile(path, kMaxTokenFileBytes);
  if (!text.ok()) {
    return absl::UnavailableError(absl::StrCat("--admin_token_file: ", text.status().message(),
                                               "; no admin call is accepted until it holds "
                                               "the token"));
  }
  std::string token(absl::StripAsciiWhitespace(*text));
  if (token.empty()) {
    return absl::UnavailableError(absl::StrCat("--admin_token_file \"", path,
                                               "\" is empty; no admin call is accepted until "
                                               "it holds the token"));
  }
  return token;
}

absl::StatusOr<std::string> TokenFile::Current() const {
  std::lock_guard<std::mutex> lock(mu_);
  return token_;
}

void TokenFile::CheckSoon() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    check_now_ = true;
  }
  wake_.notify_all();
}

void TokenFile::Refresh() {
  auto version = StatFileVersion(path_);
  if (version.ok() && *version == version_) return;
  version_ = version.ok() ? *version : FileVersion{};
  absl::StatusOr<std::string> token =
      version.ok() ? Read(path_)
                   : absl::UnavailableError(absl::StrCat(
                         "--admin_token_file: ", version.status().message(),
                         "; no admin call is accepted until it holds the token"));
  std::lock_guard<std::mutex> lock(mu_);
  token_ = std::move(token);
}

void TokenFile::Watch() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    wake_.wait_for(lock, absl::ToChronoNanoseconds(period_),
                   [this] { return stopping_ || check_now_; });
    if (stopping_) return;
    check_now_ = false;
    lock.unlock();
    Refresh();
    lock.lock();
  }
}

}  // namespace egress
