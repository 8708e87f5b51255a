// Config parsing and validation (the --config file and UpdateConfig): any text either
// fails with INVALID_ARGUMENT naming the problem, or builds a config that, built again
// from the defaults it filled in, comes out the same.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "google/protobuf/util/message_differencer.h"
#include "service/config/config.h"

namespace {

void Check(bool condition) {
  if (!condition) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto config = egress::LoadConfigText(text, "fuzz.textproto");
  if (!config.ok()) {
    Check(absl::IsInvalidArgument(config.status()));
    Check(!config.status().message().empty());
    return 0;
  }
  auto again = egress::BuildConfig(config->proto);
  Check(again.ok());
  Check(google::protobuf::util::MessageDifferencer::Equals(again->proto, config->proto));
  egress::DescribeConfig(*again);
  return 0;
}
