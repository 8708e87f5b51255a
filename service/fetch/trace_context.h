#ifndef EGRESS_SERVICE_FETCH_TRACE_CONTEXT_H_
#define EGRESS_SERVICE_FETCH_TRACE_CONTEXT_H_

#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace egress {

// A W3C Trace Context (https://www.w3.org/TR/trace-context/) `traceparent`, parsed.
struct TraceParent {
  std::string trace_id;   // 32 lower-case hex digits, not all zero
  std::string parent_id;  // 16 lower-case hex digits, not all zero
  std::string flags;      // 2 lower-case hex digits
};

// `value` as a traceparent, or none when it is not a valid one. Version 00 must have
// exactly the four fields; a later version may have more after a '-', which are
// ignored (the spec's forward compatibility); version ff is invalid.
std::optional<TraceParent> ParseTraceParent(absl::string_view value);

// egressd's span of one fetch: a child of the caller's span, or the root of a new trace.
struct TraceContext {
  std::string trace_id;
  std::string span_id;
  std::string parent_id;   // the caller's span; empty in a new trace
  std::string flags;
  std::string tracestate;  // the caller's, passed on unchanged; empty in a new trace

  // The traceparent to send upstream: this span as the parent.
  std::string ToTraceParent() const;
};

// The span for a fetch whose caller sent `traceparent` and `tracestate` (either may be
// empty). An invalid traceparent starts a new trace, sampled, and drops the tracestate
// (the spec: a vendor's state is meaningless without its trace).
TraceContext ChildSpan(absl::string_view traceparent, absl::string_view tracestate);

}  // namespace egress

#endif  // EGRESS_SERVICE_FETCH_TRACE_CONTEXT_H_
