# Unit tests of the hardening work (issue 7): local access control, quotas,
# revocation, stale handshakes, the peer allow-list. Included from
# tests/unit/CMakeLists.txt.
include(GoogleTest)

add_executable(hardening_access_test ${CMAKE_CURRENT_LIST_DIR}/hardening_access_test.cc)
target_link_libraries(hardening_access_test PRIVATE
  rdmad_tcp rdmad_core GTest::gmock GTest::gtest_main)
gtest_discover_tests(hardening_access_test PROPERTIES LABELS unit DISCOVERY_TIMEOUT 60)
