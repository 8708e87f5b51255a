#include "service/fetch/fetch_call.h"

namespace egress::fetch {

AccessLogLine::AccessLogLine(AccessLog& log, const AccessLogSettings& settings)
    : arena_(FirstBlock(first_block_, sizeof first_block_)),
      entry(*google::protobuf::Arena::CreateMessage<egress::v1::AccessLogEntry>(&arena_)),
      log_(log),
      settings_(settings) {}

AccessLogLine::~AccessLogLine() {
  entry.set_drain(drain.empty() ? "none" : drain);
  entry.set_drained_bytes(drained_bytes);
  log_.Submit(entry, settings_);
}

google::protobuf::ArenaOptions AccessLogLine::FirstBlock(char* block, size_t size) {
  google::protobuf::ArenaOptions options;
  options.initial_block = block;
  options.initial_block_size = size;
  return options;
}

}  // namespace egress::fetch
