#include "service/fetch/fetch_trace.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "grpcpp/server_context.h"
#include "service/fetch/request_mapping.h"

namespace egress::fetch {

using egress::v1::FetchRequest;

TraceContext FetchSpan(const grpc::CallbackServerContext& context, const FetchRequest& request) {
  const auto& metadata = context.client_metadata();
  const auto parent = metadata.find("traceparent");
  if (parent == metadata.end()) {
    return ChildSpan(HeaderValue(request, "traceparent"), HeaderValue(request, "tracestate"));
  }
  const auto state = metadata.find("tracestate");
  return ChildSpan(absl::string_view(parent->second.data(), parent->second.size()),
                   state == metadata.end()
                       ? absl::string_view()
                       : absl::string_view(state->second.data(), state->second.size()));
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
