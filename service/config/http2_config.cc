#include "service/config/sections.h"

#include "absl/strings/str_cat.h"
#include "service/config/fields.h"
#include "service/config/proto_time.h"

namespace egress::config_internal {

absl::StatusOr<transport::Http2Settings> BuildHttp2(absl::string_view name,
                                                    egress::v1::Http2Config* proto,
                                                    transport::Http2Settings fallback) {
  using transport::Http2Mode;
  transport::Http2Settings settings = fallback;
  switch (proto->mode()) {
    case v1::HTTP2_MODE_UNSPECIFIED: break;
    case v1::HTTP2_MODE_AUTO: settings.mode = Http2Mode::kAuto; break;
    case v1::HTTP2_MODE_OFF: settings.mode = Http2Mode::kOff; break;
    case v1::HTTP2_MODE_REQUIRED: settings.mode = Http2Mode::kRequired; break;
    case v1::HTTP2_MODE_PRIOR_KNOWLEDGE: settings.mode = Http2Mode::kPriorKnowledge; break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat(name, ".mode: unknown mode ", static_cast<int>(proto->mode())));
  }
  static constexpr v1::Http2Mode kModes[] = {v1::HTTP2_MODE_AUTO, v1::HTTP2_MODE_OFF,
                                             v1::HTTP2_MODE_REQUIRED,
                                             v1::HTTP2_MODE_PRIOR_KNOWLEDGE};
  proto->set_mode(kModes[static_cast<int>(settings.mode)]);
  const auto bounded = [&](absl::string_view field, uint32_t value, uint32_t least,
                           uint32_t most) -> absl::Status {
    if (value >= least && value <= most) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(name, ".", field, ": must be between ",
                                                   least, " and ", most, " (got ", value, ")"));
  };
  if (proto->max_concurrent_streams()) {
    settings.max_concurrent_streams = proto->max_concurrent_streams();
  }
  if (auto status = bounded("max_concurrent_streams", settings.max_concurrent_streams, 1, 1000);
      !status.ok()) {
    return status;
  }
  proto->set_max_concurrent_streams(settings.max_concurrent_streams);
  if (proto->stream_window_bytes()) settings.stream_window_bytes = proto->stream_window_bytes();
  if (auto status = bounded("stream_window_bytes", settings.stream_window_bytes, 16 * 1024,
                            16 * 1024 * 1024);
      !status.ok()) {
    return status;
  }
  proto->set_stream_window_bytes(settings.stream_window_bytes);
  if (proto->connection_window_bytes()) {
    settings.connection_window_bytes = proto->connection_window_bytes();
  }
  if (auto status = bounded("connection_window_bytes", settings.connection_window_bytes,
                            settings.stream_window_bytes, 1u << 30);
      !status.ok()) {
    return status;
  }
  proto->set_connection_window_bytes(settings.connection_window_bytes);
  if (proto->has_ping_interval()) {  // 0: never
    settings.ping_interval = FromProto(proto->ping_interval());
    if (settings.ping_interval < absl::ZeroDuration()) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ".ping_interval: must not be negative (got ",
          absl::FormatDuration(settings.ping_interval), ")"));
    }
  }
  ToProto(settings.ping_interval, proto->mutable_ping_interval());
  const bool timeout_set = proto->has_ping_timeout();
  if (auto status = DurationField(absl::StrCat(name, ".ping_timeout"), timeout_set,
                                  proto->mutable_ping_timeout(), settings.ping_timeout,
                                  &settings.ping_timeout);
      !status.ok()) {
    return status;
  }
  if (settings.ping_timeout < absl::Milliseconds(1) || settings.ping_timeout > absl::Minutes(1)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ".ping_timeout: must be between 1ms and 1m (got ",
                     absl::FormatDuration(settings.ping_timeout), ")"));
  }
  return settings;
}

}  // namespace egress::config_internal
