#ifndef EGRESS_SERVICE_FETCH_REQUEST_MAPPING_H_
#define EGRESS_SERVICE_FETCH_REQUEST_MAPPING_H_

// egress.v1.FetchRequest -> the transport's HttpRequest and the fetch's deadline: the
// contract's request fields read, checked against the limits, and mapped.

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "egress/v1/egress.pb.h"
#include "service/config/config.h"
#include "service/transport/http/request.h"

namespace egress::fetch {

// A request header's value: value_bytes carries what a proto3 string cannot (e.g.
// Latin-1), and wins when set.
const std::string& ValueOf(const egress::v1::Header& header);

// The first value of a request header (case-insensitive name), or empty.
std::string HeaderValue(const egress::v1::FetchRequest& request, absl::string_view name);

// Takes the body out of `request` (it is held once, in the HttpRequest, from here on).
absl::StatusOr<transport::HttpRequest> ToHttpRequest(egress::v1::FetchRequest& request,
                                                      const FetchLimits& limits);

// The sooner of the caller's deadline (absl::InfiniteFuture() when it set none) and the
// request's timeout; the server default when neither is set; never later than
// limits.max_timeout from now (`capped` says whether that cap decided it).
absl::Time Deadline(absl::Time caller_deadline, const egress::v1::FetchRequest& request,
                    const FetchLimits& limits, bool* capped);

}  // namespace egress::fetch

#endif  // EGRESS_SERVICE_FETCH_REQUEST_MAPPING_H_
