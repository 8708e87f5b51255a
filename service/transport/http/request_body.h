#ifndef EGRESS_SERVICE_TRANSPORT_HTTP_REQUEST_BODY_H_
#define EGRESS_SERVICE_TRANSPORT_HTTP_REQUEST_BODY_H_

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/string_view.h"

namespace egress::transport {

// A request's body, held once: every hop (a redirect) and attempt (a retry) of a fetch,
// and the write that sends it, share these bytes; the last to let go frees them. A copy
// costs a reference count, never the bytes. Immutable once made, so any thread may read it.
class RequestBody {
 public:
  RequestBody() = default;
  // Implicit: a body is made from its bytes, as a std::string is from its characters.
  RequestBody(std::string bytes)  // NOLINT(google-explicit-constructor)
      : bytes_(bytes.empty() ? nullptr
                             : std::make_shared<const std::string>(std::move(bytes))) {}
  RequestBody(const char* bytes) : RequestBody(std::string(bytes)) {}  // NOLINT

  absl::string_view view() const { return bytes_ ? absl::string_view(*bytes_) : absl::string_view(); }
  size_t size() const { return bytes_ ? bytes_->size() : 0; }
  bool empty() const { return size() == 0; }

 private:
  std::shared_ptr<const std::string> bytes_;
};

}  // namespace egress::transport

#endif  // EGRESS_SERVICE_TRANSPORT_HTTP_REQUEST_BODY_H_
