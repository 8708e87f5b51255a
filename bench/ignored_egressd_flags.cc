// egressd's flags, which bench/ab.py passes to every variant it runs: the floors
// (transport_floor, loop_server_floor) accept them and use none.
#include <string>

#include "absl/flags/flag.h"

ABSL_FLAG(std::string, config, "", "unused");
ABSL_FLAG(std::string, admin_listen, "", "unused");
ABSL_FLAG(std::string, metrics_listen, "", "unused");
ABSL_FLAG(std::string, access_log, "", "unused");
