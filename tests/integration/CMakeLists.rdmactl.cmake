# Integration tests of rdmactl commands against real daemons: `rdmactl
# bench` between two rdmad processes on loopback. Included from
# tests/integration/CMakeLists.txt (uses its rdmad_integration_test()).
rdmad_integration_test(rdmactl_bench_test)
add_dependencies(rdmactl_bench_test rdmactl)
