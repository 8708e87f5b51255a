#ifndef EGRESS_TESTS_SUPPORT_DATA_PLANE_UNDER_TEST_H_
#define EGRESS_TESTS_SUPPORT_DATA_PLANE_UNDER_TEST_H_

#include <string>

namespace egress::testing {

// What serves the Egress port in the tests that do not choose: egressd's --data_plane value
// from EGRESS_TEST_DATA_PLANE ("loops", egressd's default, when unset), so that one suite
// runs against either front end (bazel test --test_env=EGRESS_TEST_DATA_PLANE=grpc_library).
std::string DataPlaneUnderTest();

}  // namespace egress::testing

#endif  // EGRESS_TESTS_SUPPORT_DATA_PLANE_UNDER_TEST_H_
