// The one source of rdmad_test_pch (tests/CMakeLists.txt): the target exists
// to build the test suite's precompiled header, which every test file then
// reuses. Nothing here is linked into anything.
