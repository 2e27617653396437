# Integration tests of running rdmad as a service: the systemd notify
# protocol, config reload, metrics, the packaged unit. Included from
# tests/integration/CMakeLists.txt (uses its rdmad_integration_test()).
rdmad_integration_test(systemd_notify_test)

# The systemd unit, sysusers.d and tmpfiles.d files, checked by systemd's own
# tools (exit 77 = skipped, only where systemd-analyze is missing).
add_test(NAME systemd_files_test
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/systemd_files_test.sh
          ${PROJECT_SOURCE_DIR} $<TARGET_FILE:rdmad>)
set_tests_properties(systemd_files_test PROPERTIES
  LABELS integration SKIP_RETURN_CODE 77 TIMEOUT 120)
rdmad_integration_test(config_reload_test)
rdmad_integration_test(metrics_test)

# The Python example client (examples/python) against a daemon. Debian's
# interpreter, where python3-grpcio lives (a python3 earlier on PATH, e.g.
# pyenv's, may lack it).
set(RDMAD_PYTHON /usr/bin/python3 CACHE FILEPATH
    "Python 3 with the grpc and protobuf modules, for the Python example test")
rdmad_integration_test(python_example_test)
target_compile_definitions(python_example_test PRIVATE
  RDMAD_PYTHON="${RDMAD_PYTHON}"
  RDMAD_PYTHON_EXAMPLE="${PROJECT_SOURCE_DIR}/examples/python/rdmad_client.py"
  RDMAD_PROTO_DIR="${PROJECT_SOURCE_DIR}/proto")

# The .deb built from this tree (cpack), checked with dpkg-deb; installed
# and purged for real only as root with CI set.
# A sanitizer build's static client library needs the sanitizer runtime in
# whatever links it.
set(RDMAD_PACKAGE_TEST_CXXFLAGS "")
if(RDMAD_SANITIZE)
  set(RDMAD_PACKAGE_TEST_CXXFLAGS "-fsanitize=address,undefined")
endif()
add_test(NAME package_test
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/package_test.sh ${CMAKE_BINARY_DIR}
          "${RDMAD_PACKAGE_TEST_CXXFLAGS}")
set_tests_properties(package_test PROPERTIES
  LABELS integration TIMEOUT 300 RUN_SERIAL TRUE)

# rdmactl's bash completion, against a daemon the script starts.
add_test(NAME completion_test
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/completion_test.sh ${PROJECT_SOURCE_DIR}
          $<TARGET_FILE:rdmad> $<TARGET_FILE:rdmactl>)
set_tests_properties(completion_test PROPERTIES LABELS integration TIMEOUT 120)
