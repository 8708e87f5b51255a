#include "tests/support/data_plane_under_test.h"

#include <cstdlib>

namespace egress::testing {

std::string DataPlaneUnderTest() {
  const char* chosen = std::getenv("EGRESS_TEST_DATA_PLANE");
  return chosen && *chosen ? chosen : "loops";
}

}  // namespace egress::testing
