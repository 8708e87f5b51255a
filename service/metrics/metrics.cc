// Metrics' origin rows (label slots, eviction, the live-connection bookkeeping) and its
// histograms.
#include "service/metrics/metrics.h"

#include <utility>

#include "service/metrics/families.h"

namespace egress {
namespace {

using metrics::Id;
using metrics::Spec;
using transport::ConnectionState;

// A histogram family, named as kFamilies declares it.
prometheus::Family<prometheus::Histogram>& RegisterHistogram(prometheus::Registry& registry,
                                                             Id id) {
  return prometheus::BuildHistogram().Name(Spec(id).name).Help(Spec(id).help).Register(registry);
}

// A histogram family's bucket boundaries, as prometheus-cpp takes them.
prometheus::Histogram::BucketBoundaries Buckets(Id id) {
  return {Spec(id).buckets.begin(), Spec(id).buckets.end()};
}

// A histogram family without labels, and its one histogram.
prometheus::Histogram& MakeHistogram(prometheus::Registry& registry, Id id) {
  return RegisterHistogram(registry, id).Add({}, Buckets(id));
}

}  // namespace

Metrics::Metrics(size_t max_origins)
    : histograms_(std::make_shared<prometheus::Registry>()),
      drain_duration_(MakeHistogram(*histograms_, Id::kDrainDuration)),
      fetch_duration_(MakeHistogram(*histograms_, Id::kFetchDuration)),
      pool_wait_(MakeHistogram(*histograms_, Id::kPoolWait)),
      http2_streams_per_connection_(MakeHistogram(*histograms_, Id::kHttp2StreamsPerConnection)),
      dial_duration_(RegisterHistogram(*histograms_, Id::kDialDuration)),
      dial_dns_(dial_duration_.Add({{"phase", "dns"}}, Buckets(Id::kDialDuration))),
      dial_connect_(dial_duration_.Add({{"phase", "connect"}}, Buckets(Id::kDialDuration))),
      dial_tls_(dial_duration_.Add({{"phase", "tls"}}, Buckets(Id::kDialDuration))),
      max_origins_(max_origins) {}

void Metrics::SetMaxOrigins(size_t max_origins) {
  std::lock_guard<std::mutex> lock(mu_);
  max_origins_ = max_origins;
  EvictDownTo(max_origins_);
}

size_t Metrics::labelled_origins() const { return origins_.size(); }

bool Metrics::EvictDownTo(size_t keep) {
  // Only quiet rows: a live connection's gauges and drains must end in the row they
  // started in.
  while (labelled_origins() > keep && !quiet_.empty()) {
    origins_.erase(quiet_.back());
    quiet_.pop_back();
    ++evictions_;
  }
  return labelled_origins() <= keep;
}

void Metrics::TrackLive(const transport::Origin& origin, OriginCounts& c, int delta) {
  if (&c == (other_ ? &*other_ : nullptr)) {
    int64_t& live = live_in_other_[origin];
    live += delta;
    if (live <= 0) live_in_other_.erase(origin);
  } else if (c.live() && c.quiet) {
    quiet_.erase(*c.quiet);
    c.quiet.reset();
  } else if (!c.live() && !c.quiet) {
    quiet_.push_front(origin);
    c.quiet = quiet_.begin();
  }
}

Metrics::OriginCounts& Metrics::For(const transport::Origin& origin) {
  auto it = origins_.find(origin);
  if (it != origins_.end()) {
    if (it->second.quiet) quiet_.splice(quiet_.begin(), quiet_, *it->second.quiet);
    return it->second;
  }
  if (live_in_other_.contains(origin) || max_origins_ == 0 || !EvictDownTo(max_origins_ - 1)) {
    if (!other_) other_ = OriginCounts{};
    return *other_;
  }
  quiet_.push_front(origin);  // until its first connection opens
  OriginCounts& row = origins_[origin];
  row.quiet = quiet_.begin();
  return row;
}

int64_t& Metrics::Gauge(OriginCounts& counts, ConnectionState state) {
  switch (state) {
    case ConnectionState::kIdle: return counts.idle;
    case ConnectionState::kDraining: return counts.draining;
    default: return counts.active;
  }
}

}  // namespace egress
