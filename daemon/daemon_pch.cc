// The one source of rdmad_daemon_pch (daemon/CMakeLists.txt): the target
// exists to build the daemon's precompiled header, which every daemon
// library then reuses. Nothing here is linked into anything.
