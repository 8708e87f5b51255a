#ifndef EGRESS_SERVICE_TRANSPORT_HTTP_HEADER_LIST_H_
#define EGRESS_SERVICE_TRANSPORT_HTTP_HEADER_LIST_H_

#include <string>
#include <utility>
#include <vector>

namespace egress::transport {

// Header fields in the order they were written or received, names as sent.
using HeaderList = std::vector<std::pair<std::string, std::string>>;

}  // namespace egress::transport

#endif  // EGRESS_SERVICE_TRANSPORT_HTTP_HEADER_LIST_H_
