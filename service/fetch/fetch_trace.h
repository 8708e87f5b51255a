#ifndef EGRESS_SERVICE_FETCH_FETCH_TRACE_H_
#define EGRESS_SERVICE_FETCH_FETCH_TRACE_H_

// A fetch's place in its caller's trace: its span from the call, and the trace headers
// it sends upstream.

#include "egress/v1/egress.pb.h"
#include "service/fetch/caller_side.h"
#include "service/fetch/trace_context.h"
#include "service/transport/http/request.h"

namespace egress::fetch {

// egressd's span of this fetch: a child of the caller's trace context, from its call's
// metadata, or else from the request's own headers (a caller that does not propagate
// over gRPC); a new trace when neither holds a valid one.
TraceContext FetchSpan(const CallerSide& caller, const egress::v1::FetchRequest& request);

// The upstream gets egressd's span as its parent, in place of any trace headers the
// caller put in the request.
void SetTraceHeaders(const TraceContext& span, transport::HeaderList* headers);

}  // namespace egress::fetch

#endif  // EGRESS_SERVICE_FETCH_FETCH_TRACE_H_
