#include "service/config/config.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "service/config/fields.h"
#include "service/config/proto_time.h"
#include "service/config/sections.h"

namespace egress {

using config_internal::BuildAccessLog;
using config_internal::BuildAffinity;
using config_internal::BuildDrain;
using config_internal::BuildLimits;
using config_internal::BuildOverride;
using config_internal::BuildPolicy;
using config_internal::BuildQuotas;
using config_internal::BuildQuotaStore;
using config_internal::BuildTransport;
using config_internal::kMaxOriginLabels;
using config_internal::NumberOrDefault;

absl::StatusOr<ServiceConfig> BuildConfig(const egress::v1::Config& proto) {
  if (absl::Status durations = CheckDurations(proto); !durations.ok()) return durations;
  ServiceConfig config;
  config.proto = proto;
  transport::TransportSettings& t = config.transport;
  auto* tp = config.proto.mutable_transport();
  if (auto status = BuildTransport(tp, t); !status.ok()) return status;

  auto drain = BuildDrain("drain", config.proto.mutable_drain(), t.drain);
  if (!drain.ok()) return drain.status();
  t.drain = *drain;

  for (int i = 0; i < tp->origins_size(); ++i) {
    auto o = BuildOverride(i, tp->mutable_origins(i), t);
    if (!o.ok()) return o.status();
    t.origin_overrides.push_back(*std::move(o));
  }

  auto* metrics = config.proto.mutable_metrics();
  NumberOrDefault(metrics, &v1::MetricsConfig::max_origin_labels,
                  &v1::MetricsConfig::set_max_origin_labels, &config.max_origin_labels);
  if (config.max_origin_labels > kMaxOriginLabels) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metrics.max_origin_labels: at most ", kMaxOriginLabels, " (got ",
        config.max_origin_labels, "); each origin label adds some 35 series to every scrape"));
  }

  if (auto status = BuildAccessLog(config.proto.mutable_access_log(), &config.access_log);
      !status.ok()) {
    return status;
  }

  if (auto status = BuildLimits(config.proto.mutable_limits(), config.limits); !status.ok()) {
    return status;
  }
  if (auto status = BuildPolicy(config.proto.mutable_policy(), &config); !status.ok()) {
    return status;
  }
  if (auto status = BuildQuotaStore(config.proto.mutable_quota_store(), &config.quota_store);
      !status.ok()) {
    return status;
  }
  if (auto status =
          BuildQuotas(config.proto.mutable_quotas(), config.quota_store, &config.quotas);
      !status.ok()) {
    return status;
  }
  if (auto status = BuildAffinity(config.proto.mutable_affinity(), &config.fleet); !status.ok()) {
    return status;
  }
  return config;
}

}  // namespace egress
