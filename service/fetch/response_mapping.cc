#include "service/fetch/response_mapping.h"

#include <utility>

#include "service/config/proto_time.h"
#include "service/fetch/utf8_text.h"

namespace egress::fetch {

using egress::v1::FetchResponse;
using transport::Response;

void SetHeaderValue(std::string value, egress::v1::Header* header) {
  if (IsUtf8(value)) {
    header->set_value(std::move(value));
    return;
  }
  header->set_value(Latin1ToUtf8(value));
  header->set_value_bytes(std::move(value));
}

void FillTiming(const transport::ConnectionDetails& c, absl::Duration total,
                egress::v1::Timing* timing) {
  ToProto(c.dial.dns, timing->mutable_dns());
  ToProto(c.dial.connect, timing->mutable_connect());
  ToProto(c.dial.tls_handshake, timing->mutable_tls_handshake());
  ToProto(c.time_to_first_byte, timing->mutable_time_to_first_byte());
  ToProto(total, timing->mutable_total());
}

void FillHead(Response& response, absl::Time start, const TraceContext& trace,
              FetchResponse* out) {
  out->set_status_code(response.head.status_code);
  out->mutable_headers()->Reserve(static_cast<int>(response.head.headers.size()));
  for (auto& [name, value] : response.head.headers) {
    auto* header = out->add_headers();
    header->set_name(std::move(name));  // a token (the parser checks): ASCII
    SetHeaderValue(std::move(value), header);
  }
  const transport::ConnectionDetails& c = response.connection;
  auto* info = out->mutable_connection();
  info->set_reused(c.reused);
  info->set_was_idle(c.was_idle);
  ToProto(c.idle_time, info->mutable_idle_time());
  info->set_connection_id(c.connection_id);
  info->set_remote_address(c.remote_address);
  info->set_protocol(c.protocol);
  FillTiming(c, absl::Now() - start, out->mutable_timing());
  out->set_trace_id(trace.trace_id);
  out->set_span_id(trace.span_id);
}

}  // namespace egress::fetch
