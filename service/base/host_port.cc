#include "service/base/host_port.h"

#include "absl/strings/str_cat.h"

namespace egress {

void AppendHostPort(std::string* out, absl::string_view host, int port) {
  if (host.find(':') != absl::string_view::npos) {
    absl::StrAppend(out, "[", host, "]:", port);
  } else {
    absl::StrAppend(out, host, ":", port);
  }
}

std::string HostPort(absl::string_view host, int port) {
  std::string text;
  AppendHostPort(&text, host, port);
  return text;
}

}  // namespace egress
