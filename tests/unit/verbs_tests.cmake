# Unit tests of the verbs layer (daemon/transport/verbs). They need no RDMA
# device: pure conversions, GID choice on synthetic tables, QP parameter
# negotiation, and discovery on a host that has none.
#
# Included from tests/unit/CMakeLists.txt with
#   include(${CMAKE_CURRENT_SOURCE_DIR}/verbs_tests.cmake)
# (kept in its own file so the verbs owner edits only verbs_* files).
include(GoogleTest)
add_executable(rdmad_verbs_unit_test
  ${CMAKE_CURRENT_LIST_DIR}/verbs_conversions_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/verbs_device_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/verbs_gid_selection_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/verbs_queue_pair_test.cc
)
target_link_libraries(rdmad_verbs_unit_test PRIVATE
  rdmad_verbs GTest::gmock GTest::gtest_main)
gtest_discover_tests(rdmad_verbs_unit_test
  PROPERTIES LABELS unit
  DISCOVERY_TIMEOUT 30)
