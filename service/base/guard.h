#ifndef EGRESS_SERVICE_BASE_GUARD_H_
#define EGRESS_SERVICE_BASE_GUARD_H_

#include <exception>
#include <utility>

#include "absl/strings/string_view.h"

namespace egress::transport {

// The exception boundary of an I/O handler: runs `step` and gives what it threw (its
// what(), or a fixed text for anything else) to `on_exception`, so that no exception
// leaves a loop (see Connection::Guard, http2::Session::Guard).
template <class F, class OnException>
void RunGuarded(F&& step, OnException&& on_exception) {
  try {
    std::forward<F>(step)();
  } catch (const std::exception& e) {
    on_exception(absl::string_view(e.what()));
  } catch (...) {
    on_exception(absl::string_view("an exception of unknown type"));
  }
}

}  // namespace egress::transport

#endif  // EGRESS_SERVICE_BASE_GUARD_H_
