# rdmad_proto_library(<target> ROOT <dir> PROTOS <file.proto>...)
#
# Generates C++ messages and gRPC stubs for the given .proto files (paths
# relative to ROOT, which is also the import root) into the current binary
# directory and builds them as a static library whose users include
# "<relative path>.pb.h" / ".grpc.pb.h".
function(rdmad_proto_library target)
  cmake_parse_arguments(ARG "" "ROOT" "PROTOS" ${ARGN})
  set(gen_dir ${CMAKE_CURRENT_BINARY_DIR})
  set(gen_srcs)
  foreach(rel ${ARG_PROTOS})
    string(REGEX REPLACE "\\.proto$" "" base ${rel})
    set(outs
      ${gen_dir}/${base}.pb.cc ${gen_dir}/${base}.pb.h
      ${gen_dir}/${base}.grpc.pb.cc ${gen_dir}/${base}.grpc.pb.h)
    add_custom_command(
      OUTPUT ${outs}
      COMMAND protobuf::protoc
        --proto_path=${ARG_ROOT}
        --cpp_out=${gen_dir}
        --grpc_out=${gen_dir}
        --plugin=protoc-gen-grpc=$<TARGET_FILE:gRPC::grpc_cpp_plugin>
        ${ARG_ROOT}/${rel}
      DEPENDS ${ARG_ROOT}/${rel}
      COMMENT "protoc ${rel}")
    list(APPEND gen_srcs ${outs})
  endforeach()
  add_library(${target} STATIC ${gen_srcs})
  # protoc gives every generated file the same file-local names (schemas,
  # file_default_instances): they cannot share a unity source.
  set_target_properties(${target} PROPERTIES UNITY_BUILD OFF)
  target_include_directories(${target} PUBLIC ${gen_dir})
  target_link_libraries(${target} PUBLIC protobuf::libprotobuf gRPC::grpc++)
  # Generated code is not ours to fix.
  target_compile_options(${target} PRIVATE -Wno-unused-parameter)
endfunction()
