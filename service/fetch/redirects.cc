#include "service/fetch/redirects.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "boost/url/parse.hpp"
#include "boost/url/url.hpp"
#include "service/base/error_reason.h"

namespace egress::fetch {

using transport::Response;

std::optional<std::string> RedirectLocation(const Response& response) {
  const int code = response.head.status_code;
  if (code != 301 && code != 302 && code != 303 && code != 307 && code != 308) {
    return std::nullopt;
  }
  for (const auto& [name, value] : response.head.headers) {
    if (absl::EqualsIgnoreCase(name, "location")) return value;
  }
  return std::nullopt;
}

absl::StatusOr<transport::HttpRequest> NextHop(const transport::HttpRequest& current,
                                               const std::string& current_url,
                                               std::string& location, int status_code,
                                               const std::vector<std::string>& strip_headers) {
  auto base = boost::urls::parse_uri(current_url);
  auto reference = boost::urls::parse_uri_reference(location);
  if (!base || !reference) {
    return transport::WithReason(
        transport::UrlError(absl::StatusCode::kUnavailable,
                            "upstream redirected to an invalid Location ", location, ""),
        "INVALID_REDIRECT");
  }
  boost::urls::url resolved;
  if (auto result = boost::urls::resolve(*base, *reference, resolved); !result) {
    return transport::WithReason(
        transport::UrlError(absl::StatusCode::kUnavailable, "cannot resolve redirect Location ",
                            location, ""),
        "INVALID_REDIRECT");
  }
  location = std::string(resolved.buffer());
  const bool to_get = status_code == 303 || ((status_code == 301 || status_code == 302) &&
                                             current.method == "POST");
  auto next = transport::MakeRequest(to_get ? "GET" : current.method, location,
                                     current.headers,
                                     to_get ? transport::RequestBody() : current.body);
  if (!next.ok()) return next.status();
  if (!(next->origin == current.origin)) {
    auto& headers = next->headers;
    headers.erase(std::remove_if(headers.begin(), headers.end(),
                                 [&](const auto& header) {
                                   return std::find(strip_headers.begin(), strip_headers.end(),
                                                    absl::AsciiStrToLower(header.first)) !=
                                          strip_headers.end();
                                 }),
                  headers.end());
  }
  next->caller = current.caller;
  next->body_memory = current.body_memory;
  return next;
}

}  // namespace egress::fetch
