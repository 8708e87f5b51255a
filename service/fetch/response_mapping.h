#ifndef EGRESS_SERVICE_FETCH_RESPONSE_MAPPING_H_
#define EGRESS_SERVICE_FETCH_RESPONSE_MAPPING_H_

// The transport's Response -> egress.v1's response head: status, headers, connection
// info, timing and trace (the body is the reactors').

#include <string>

#include "absl/time/time.h"
#include "egress/v1/egress.pb.h"
#include "service/fetch/trace_context.h"
#include "service/transport/transport.h"

namespace egress::fetch {

// A header value as the contract carries it: text when it is UTF-8, else the exact bytes
// in value_bytes and their ISO-8859-1 reading in value.
void SetHeaderValue(std::string value, egress::v1::Header* header);

// A connection's dial timings, its time to first byte and `total`.
void FillTiming(const transport::ConnectionDetails& c, absl::Duration total,
                egress::v1::Timing* timing);

// Status, headers, connection info, timing and trace: everything but the body. The
// header strings are moved out of `response`, not copied.
void FillHead(transport::Response& response, absl::Time start, const TraceContext& trace,
              egress::v1::FetchResponse* out);

}  // namespace egress::fetch

#endif  // EGRESS_SERVICE_FETCH_RESPONSE_MAPPING_H_
