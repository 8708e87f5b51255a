#ifndef EGRESS_SERVICE_FETCH_REDIRECTS_H_
#define EGRESS_SERVICE_FETCH_REDIRECTS_H_

// Following a redirect: whether a response is one, and the request for its next hop.

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "service/transport/http/request.h"
#include "service/transport/transport.h"

namespace egress::fetch {

// The absolute URL a redirect response points to, if it is one.
std::optional<std::string> RedirectLocation(const transport::Response& response);

// The request for the next hop: Location resolved against the current URL; 303, and
// 301/302 after a POST, become a GET without a body (as browsers and Go do). A hop to
// another origin (scheme, host or port) goes without the headers in `strip_headers`
// (lower-case names), so that credentials reach only the origin they were meant for;
// once dropped they stay dropped, even on a hop back.
absl::StatusOr<transport::HttpRequest> NextHop(const transport::HttpRequest& current,
                                               const std::string& current_url,
                                               std::string& location, int status_code,
                                               const std::vector<std::string>& strip_headers);

}  // namespace egress::fetch

#endif  // EGRESS_SERVICE_FETCH_REDIRECTS_H_
