#include "service/admin/token_file.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace egress {

TokenFile::TokenFile(std::string path, absl::Duration period)
    : path_(std::move(path)),
      version_(StatFileVersion(path_).value_or(FileVersion{})),  // before the read
      token_(Read(path_)),
      watcher_(period, [this] { Refresh(); }) {}

TokenFile::~TokenFile() = default;

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

}  // namespace egress
