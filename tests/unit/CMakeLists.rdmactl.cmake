# Unit tests of rdmactl's pure parts (rdmactl_lib): here the statistics,
# report and command line of `rdmactl bench`. No daemon. Included from
# tests/unit/CMakeLists.txt (uses its rdmad_unit_test()).
rdmad_unit_test(rdmactl_bench_stats_test rdmactl_lib)
