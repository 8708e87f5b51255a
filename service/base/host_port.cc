#include "service/base/host_port.h"

#include "absl/strings/str_cat.h"

namespace egress {

void AppendUrlHost(std::string* out, absl::string_view host) {
  if (host.find(':') != absl::string_view::npos) {
    absl::StrAppend(out, "[", host, "]");
  } else {
    absl::StrAppend(out, host);
  }
}

void AppendHostPort(std::string* out, absl::string_view host, int port) {
  AppendUrlHost(out, host);
  absl::StrAppend(out, ":", port);
}

std::string HostPort(absl::string_view host, int port) {
  std::string text;
  AppendHostPort(&text, host, port);
  return text;
}

}  // namespace egress
