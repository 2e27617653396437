# Integration tests of the TCP transport: real rdmad daemons (child
# processes) on loopback, driven through the client library. Included from
# tests/integration/CMakeLists.txt (uses its rdmad_integration_test()).
rdmad_integration_test(transfer_test)
