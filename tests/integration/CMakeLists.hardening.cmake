# Integration tests of the hardening work (issue 7): access control,
# revocation, peer allow-list, mutual TLS, malformed input, leaks and soak.
# Real rdmad daemons on loopback. Included from
# tests/integration/CMakeLists.txt (uses its rdmad_integration_test()).
add_library(rdmad_raw_session STATIC raw_session.cc)
target_include_directories(rdmad_raw_session PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(rdmad_raw_session PUBLIC rdmad_proto rdmad_common gRPC::grpc++)

add_executable(rdmad_hardening_client hardening_client.cc)
target_link_libraries(rdmad_hardening_client PRIVATE rdmad_raw_session)

rdmad_integration_test(hardening_security_test rdmad_raw_session)
target_compile_definitions(hardening_security_test PRIVATE
  HARDENING_CLIENT_PATH="$<TARGET_FILE:rdmad_hardening_client>")
add_dependencies(hardening_security_test rdmad_hardening_client)

rdmad_integration_test(hardening_bad_input_test rdmad_raw_session)

# The soak and leak tests load both cores for a while; run them alone so
# that they do not starve other tests' deadlines.
add_executable(hardening_soak_test hardening_soak_test.cc)
target_link_libraries(hardening_soak_test PRIVATE rdmad_test_fixture
  GTest::gtest GTest::gmock GTest::gtest_main)
gtest_discover_tests(hardening_soak_test PROPERTIES LABELS integration
  TIMEOUT 300 RUN_SERIAL TRUE DISCOVERY_TIMEOUT 60)
