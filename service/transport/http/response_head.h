#ifndef EGRESS_SERVICE_TRANSPORT_HTTP_RESPONSE_HEAD_H_
#define EGRESS_SERVICE_TRANSPORT_HTTP_RESPONSE_HEAD_H_

#include "service/transport/http/header_list.h"

namespace egress::transport {

// The status line and header block of a response, whichever HTTP version carried it.
struct ResponseHead {
  int status_code = 0;
  HeaderList headers;
};

}  // namespace egress::transport

#endif  // EGRESS_SERVICE_TRANSPORT_HTTP_RESPONSE_HEAD_H_
