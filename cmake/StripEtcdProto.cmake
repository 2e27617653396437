# cmake -DIN=<file.proto> -DOUT=<file.proto> -P StripEtcdProto.cmake
#
# Copies one of etcd's .proto files (Debian golang-etcd-server-dev) without
# the annotations protoc cannot resolve here: the gogoproto options and
# imports (Go code generation hints) and the google.api.http options and
# import (the grpc-gateway's HTTP mapping). Neither changes the wire format
# or the gRPC API, so the stubs generated from the result talk to etcd as
# etcd's own client does. Import paths are kept ("etcd/mvcc/mvccpb/kv.proto").
file(READ "${IN}" text)
string(REGEX REPLACE "import \"gogoproto/gogo.proto\";" "" text "${text}")
string(REGEX REPLACE "import \"google/api/annotations.proto\";" "" text "${text}")
# File options: option (gogoproto.marshaler_all) = true;
string(REGEX REPLACE "option \\(gogoproto\\.[a-z_]+\\) = [a-z]+;" "" text "${text}")
# Field options: [(gogoproto.nullable) = false, ...]
string(REGEX REPLACE "\\[\\(gogoproto\\.[^]]*\\]" "" text "${text}")
# Method options spanning lines, with at most one level of nested braces
# (additional_bindings { ... }): option (google.api.http) = { ... };
string(REGEX REPLACE
  "option \\(google\\.api\\.http\\) = {[^{}]*({[^{}]*}[^{}]*)*};" ""
  text "${text}")
if(text MATCHES "gogoproto|google\\.api")
  message(FATAL_ERROR "${IN}: annotations left after stripping; "
                      "this etcd version needs a new rule in ${CMAKE_CURRENT_LIST_FILE}")
endif()
file(WRITE "${OUT}" "${text}")
