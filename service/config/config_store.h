#ifndef EGRESS_SERVICE_CONFIG_CONFIG_STORE_H_
#define EGRESS_SERVICE_CONFIG_CONFIG_STORE_H_

#include <memory>
#include <mutex>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "service/config/config.h"

namespace egress {

// The config in force, swapped atomically. Readers take a snapshot and keep it for the
// whole of what they do, so a request finishes under the config it started with.
class ConfigStore {
 public:
  explicit ConfigStore(ServiceConfig initial)
      : current_(std::make_shared<const ServiceConfig>(std::move(initial))) {}

  std::shared_ptr<const ServiceConfig> Get() const {
    std::lock_guard<std::mutex> lock(mu_);
    return current_;
  }

  void Set(ServiceConfig config) {
    auto next = std::make_shared<const ServiceConfig>(std::move(config));
    std::lock_guard<std::mutex> lock(mu_);
    current_ = std::move(next);
  }

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const ServiceConfig> current_ ABSL_GUARDED_BY(mu_);
};

}  // namespace egress

#endif  // EGRESS_SERVICE_CONFIG_CONFIG_STORE_H_
