#include "service/fetch/fetch_trace.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "service/fetch/request_mapping.h"

namespace egress::fetch {

using egress::v1::FetchRequest;

TraceContext FetchSpan(const CallerSide& caller, const FetchRequest& request) {
  const auto parent = caller.Metadata("traceparent");
  if (parent.empty()) {
    return ChildSpan(HeaderValue(request, "traceparent"), HeaderValue(request, "tracestate"));
  }
  const auto state = caller.Metadata("tracestate");
  return ChildSpan(parent.front(), state.empty() ? absl::string_view() : state.front());
}

void SetTraceHeaders(const TraceContext& span, transport::HeaderList* headers) {
  headers->erase(std::remove_if(headers->begin(), headers->end(),
                                [](const auto& header) {
                                  return absl::EqualsIgnoreCase(header.first, "traceparent") ||
                                         absl::EqualsIgnoreCase(header.first, "tracestate");
                                }),
                 headers->end());
  headers->emplace_back("traceparent", span.ToTraceParent());
  if (!span.tracestate.empty()) headers->emplace_back("tracestate", span.tracestate);
}

}  // namespace egress::fetch
