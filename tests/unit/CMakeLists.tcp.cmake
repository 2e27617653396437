# Unit tests of the TCP data transport (daemon/transport/tcp) and the peer
# layer (daemon/peer). No daemon process: in-process servers and channels
# on loopback. Included from tests/unit/CMakeLists.txt.
include(GoogleTest)

add_executable(tcp_wire_test ${CMAKE_CURRENT_LIST_DIR}/tcp_wire_test.cc)
target_link_libraries(tcp_wire_test PRIVATE
  rdmad_tcp GTest::gmock GTest::gtest_main)
gtest_discover_tests(tcp_wire_test PROPERTIES LABELS unit DISCOVERY_TIMEOUT 60)

add_executable(tcp_data_server_test ${CMAKE_CURRENT_LIST_DIR}/tcp_data_server_test.cc)
target_link_libraries(tcp_data_server_test PRIVATE
  rdmad_tcp GTest::gmock GTest::gtest_main)
gtest_discover_tests(tcp_data_server_test PROPERTIES LABELS unit DISCOVERY_TIMEOUT 60)

add_executable(tcp_peer_channel_test ${CMAKE_CURRENT_LIST_DIR}/tcp_peer_channel_test.cc)
target_link_libraries(tcp_peer_channel_test PRIVATE
  rdmad_tcp GTest::gmock GTest::gtest_main)
gtest_discover_tests(tcp_peer_channel_test PROPERTIES LABELS unit DISCOVERY_TIMEOUT 60)
