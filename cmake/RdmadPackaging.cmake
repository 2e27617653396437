# Installation layout and the Debian package (CPack DEB).
#
#   scripts/package.sh        builds build-pkg/rdmad_<version>_<arch>.deb
#
# Three packages:
#   rdmad      the daemon and rdmactl, the systemd unit with its sysusers.d
#              and tmpfiles.d files, the default configuration (a conffile,
#              so local edits survive upgrades), man pages and bash
#              completion. Runtime dependencies come from dpkg-shlibdeps.
#              The maintainer scripts create the user and directory and
#              reload systemd, but neither enable nor start the service: an
#              RDMA node needs its config looked at first
#              (`systemctl enable --now rdmad`).
#   librdmad-client0
#              the client library, librdmad_client.so.0 (its soname), with
#              the ldconfig trigger and a shlibs file.
#   python3-rdmad
#              the Python package rdmad (python/: the extension module over
#              librdmad_client.so.0 and the pure-Python modules) in Debian's
#              dist-packages, for Debian's python3; built where the build
#              has it (RDMAD_PYTHON_BUILT).
#   rdmad-dev  what building against it takes: its headers (rdmad/*.h;
#              they include no generated code), the librdmad_client.so
#              link, a pkg-config file (g++ app.cc $(pkg-config --cflags
#              --libs rdmad-client)), the static archives (with
#              pkg-config --static), and the .proto files of the gRPC API
#              under /usr/share/rdmad/proto for clients in other languages.
# Each carries /usr/share/doc/<package>/copyright and changelog.gz, as
# Debian policy (and lintian, run by tests/integration/package_test.sh)
# wants.

include(GNUInstallDirs)

# Paths under the /usr prefix that Debian expects; /etc is absolute.
set(RDMAD_UNIT_DIR lib/systemd/system)
set(RDMAD_SYSUSERS_DIR lib/sysusers.d)
set(RDMAD_TMPFILES_DIR lib/tmpfiles.d)

install(FILES ${PROJECT_SOURCE_DIR}/systemd/rdmad.service
        DESTINATION ${RDMAD_UNIT_DIR})
install(FILES ${PROJECT_SOURCE_DIR}/systemd/rdmad.sysusers
        DESTINATION ${RDMAD_SYSUSERS_DIR} RENAME rdmad.conf)
install(FILES ${PROJECT_SOURCE_DIR}/systemd/rdmad.tmpfiles
        DESTINATION ${RDMAD_TMPFILES_DIR} RENAME rdmad.conf)
install(FILES ${PROJECT_SOURCE_DIR}/systemd/rdmad.conf
        DESTINATION /etc/rdmad)
install(FILES ${PROJECT_SOURCE_DIR}/deploy/bash-completion/rdmactl
        DESTINATION share/bash-completion/completions)

# Who answers for the packages (Maintainer:, the changelog, the copyright
# file). Set it to a real address when publishing packages.
set(RDMAD_MAINTAINER "rdmad maintainers <rdmad-maintainers@example.org>"
    CACHE STRING "Maintainer of the Debian packages: NAME <EMAIL>")

# Man pages, gzipped as Debian policy wants (-n: no timestamp, so the
# package is reproducible).
foreach(page rdmad.8 rdmactl.8)
  add_custom_command(
    OUTPUT ${CMAKE_BINARY_DIR}/man/${page}.gz
    COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/man
    COMMAND gzip -9n -c ${PROJECT_SOURCE_DIR}/docs/man/${page}
            > ${CMAKE_BINARY_DIR}/man/${page}.gz
    DEPENDS ${PROJECT_SOURCE_DIR}/docs/man/${page}
    VERBATIM)
  list(APPEND RDMAD_MAN_PAGES ${CMAKE_BINARY_DIR}/man/${page}.gz)
endforeach()
add_custom_target(rdmad_man_pages ALL DEPENDS ${RDMAD_MAN_PAGES})
install(FILES ${RDMAD_MAN_PAGES} DESTINATION ${CMAKE_INSTALL_MANDIR}/man8)

# /usr/share/doc/<package>: copyright, a changelog (this is a native
# package: its version has no Debian revision), and for rdmad the guides.
# The changelog's date honours SOURCE_DATE_EPOCH, for reproducible builds.
string(TIMESTAMP RDMAD_CHANGELOG_DATE "%a, %d %b %Y %H:%M:%S +0000" UTC)
set(RDMAD_DOC_DIR ${CMAKE_BINARY_DIR}/deb-doc)
configure_file(${PROJECT_SOURCE_DIR}/cmake/deb/changelog.in
               ${RDMAD_DOC_DIR}/changelog @ONLY)
configure_file(${PROJECT_SOURCE_DIR}/cmake/deb/copyright
               ${RDMAD_DOC_DIR}/copyright @ONLY)
set(RDMAD_GZIPPED_DOCS)
foreach(doc ${RDMAD_DOC_DIR}/changelog ${PROJECT_SOURCE_DIR}/README.md
        ${PROJECT_SOURCE_DIR}/docs/SECURITY.md
        ${PROJECT_SOURCE_DIR}/docs/PERFORMANCE.md
        ${PROJECT_SOURCE_DIR}/docs/ARCHITECTURE.md
        ${PROJECT_SOURCE_DIR}/docs/DIRECTORY.md
        ${PROJECT_SOURCE_DIR}/docs/RESTART.md)
  get_filename_component(doc_name ${doc} NAME)
  add_custom_command(
    OUTPUT ${RDMAD_DOC_DIR}/${doc_name}.gz
    COMMAND gzip -9n -c ${doc} > ${RDMAD_DOC_DIR}/${doc_name}.gz
    DEPENDS ${doc}
    VERBATIM)
  list(APPEND RDMAD_GZIPPED_DOCS ${RDMAD_DOC_DIR}/${doc_name}.gz)
endforeach()
add_custom_target(rdmad_package_docs ALL DEPENDS ${RDMAD_GZIPPED_DOCS})
install(FILES ${RDMAD_GZIPPED_DOCS} ${RDMAD_DOC_DIR}/copyright
        DESTINATION share/doc/rdmad)
install(FILES ${RDMAD_DOC_DIR}/changelog.gz ${RDMAD_DOC_DIR}/copyright
        DESTINATION share/doc/rdmad-dev COMPONENT dev)
install(FILES ${RDMAD_DOC_DIR}/changelog.gz ${RDMAD_DOC_DIR}/copyright
        DESTINATION share/doc/librdmad-client0 COMPONENT libs)

# The client library for applications: the shared library (component libs
# -> librdmad-client0), and what building against it takes (component dev
# -> rdmad-dev).
set(RDMAD_LIB_DIR lib/${CMAKE_LIBRARY_ARCHITECTURE})
install(TARGETS rdmad_client_shared
        LIBRARY DESTINATION ${RDMAD_LIB_DIR} COMPONENT libs
                NAMELINK_COMPONENT dev)
install(FILES ${PROJECT_SOURCE_DIR}/include/rdmad/client.h
              ${PROJECT_SOURCE_DIR}/include/rdmad/info.h
              ${PROJECT_SOURCE_DIR}/include/rdmad/queue.h
        DESTINATION include/rdmad COMPONENT dev)
# The API itself, for gRPC clients in other languages (grpcurl -import-path,
# grpc_tools.protoc -I /usr/share/rdmad/proto ...).
install(FILES ${PROJECT_SOURCE_DIR}/proto/rdmad/v1/rdmad.proto
              ${PROJECT_SOURCE_DIR}/proto/rdmad/v1/config.proto
        DESTINATION share/rdmad/proto/rdmad/v1 COMPONENT dev)
install(TARGETS rdmad_client rdmad_common rdmad_proto
        ARCHIVE DESTINATION ${RDMAD_LIB_DIR} COMPONENT dev)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
# pkg-config: the installed file, and one for building against this build
# tree (build/pkgconfig; pkg-config prefers a NAME-uninstalled.pc it finds
# on PKG_CONFIG_PATH), whose programs find the library where it was built
# (rpath).
set(RDMAD_PC_PREFIX ${CPACK_PACKAGING_INSTALL_PREFIX})
set(RDMAD_PC_LIBDIR "\${prefix}/${RDMAD_LIB_DIR}")
set(RDMAD_PC_INCLUDEDIR "\${prefix}/include")
set(RDMAD_PC_RPATH "")
set(RDMAD_PC_PRIVATE_LIBS "-lrdmad_common -lrdmad_proto")
configure_file(${PROJECT_SOURCE_DIR}/cmake/rdmad-client.pc.in
               ${CMAKE_BINARY_DIR}/rdmad-client.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/rdmad-client.pc
        DESTINATION ${RDMAD_LIB_DIR}/pkgconfig COMPONENT dev)
set(RDMAD_PC_PREFIX ${CMAKE_BINARY_DIR})
set(RDMAD_PC_LIBDIR "\${prefix}/client")
set(RDMAD_PC_INCLUDEDIR ${PROJECT_SOURCE_DIR}/include)
set(RDMAD_PC_RPATH "-Wl,-rpath,\${libdir} ")
set(RDMAD_PC_PRIVATE_LIBS
    "-L\${prefix}/common -L\${prefix}/proto -lrdmad_common -lrdmad_proto")
configure_file(${PROJECT_SOURCE_DIR}/cmake/rdmad-client.pc.in
               ${CMAKE_BINARY_DIR}/pkgconfig/rdmad-client-uninstalled.pc @ONLY)

# The Python package (component python -> python3-rdmad): the build tree's
# python/rdmad folder, as Debian's python3 finds it.
if(RDMAD_PYTHON_BUILT)
  set(RDMAD_PYTHON_INSTALL_DIR lib/python3/dist-packages)
  install(TARGETS rdmad_python_ext
          LIBRARY DESTINATION ${RDMAD_PYTHON_INSTALL_DIR}/rdmad
          COMPONENT python)
  foreach(module ${RDMAD_PYTHON_MODULES})
    get_filename_component(module_dir ${module} DIRECTORY)
    install(FILES ${PROJECT_SOURCE_DIR}/python/${module}
            DESTINATION ${RDMAD_PYTHON_INSTALL_DIR}/${module_dir}
            COMPONENT python)
  endforeach()
  install(FILES ${RDMAD_DOC_DIR}/changelog.gz ${RDMAD_DOC_DIR}/copyright
          DESTINATION share/doc/python3-rdmad COMPONENT python)
endif()

set(CPACK_GENERATOR DEB)
set(CPACK_DEB_COMPONENT_INSTALL ON)
# "Unspecified": everything installed without a component (the binaries,
# whose install() rules live with their targets, and the files above).
set(CPACK_COMPONENTS_ALL Unspecified dev libs)
if(RDMAD_PYTHON_BUILT)
  list(APPEND CPACK_COMPONENTS_ALL python)
  set(CPACK_DEBIAN_PYTHON_PACKAGE_NAME python3-rdmad)
  set(CPACK_DEBIAN_PYTHON_FILE_NAME DEB-DEFAULT)
  set(CPACK_DEBIAN_PYTHON_PACKAGE_SECTION python)
  # Its extension is built for Debian's python3 (3.11): the range pins it,
  # as dh-python's ${python3:Depends} would.
  set(CPACK_DEBIAN_PYTHON_PACKAGE_DEPENDS
      "librdmad-client0 (= ${PROJECT_VERSION}), python3 (>= 3.11), python3 (<< 3.12), python3-numpy")
  set(CPACK_DEBIAN_PYTHON_DESCRIPTION
      "Python package of rdmad, the per-node RDMA resource daemon\nrdmad from Python: registered buffers that numpy and torch see without a\ncopy, shared-memory queues that take operations as one array and return\ncompletions as one array, awaitable operations on asyncio (rdmad.aio),\nCUDA memory as dma-bufs (rdmad.cuda) and Mooncake Transfer Engine's API\n(rdmad.compat.mooncake).")
endif()
set(CPACK_DEBIAN_UNSPECIFIED_PACKAGE_NAME rdmad)
set(CPACK_DEBIAN_DEV_PACKAGE_NAME rdmad-dev)
set(CPACK_DEBIAN_LIBS_PACKAGE_NAME librdmad-client0)
set(CPACK_DEBIAN_UNSPECIFIED_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_DEV_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_LIBS_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_LIBS_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
    "librdmad-client0 (= ${PROJECT_VERSION}), libgrpc++-dev, libprotobuf-dev, libabsl-dev, pkg-config")
set(CPACK_DEBIAN_DEV_DESCRIPTION
    "client library of rdmad, the per-node RDMA resource daemon (development)\nHeaders (rdmad/client.h, rdmad/queue.h, rdmad/info.h), the link to the\nshared library, static archives and a pkg-config file (rdmad-client) for\napplications that use rdmad's registered buffers and one-sided transfers,\nand the .proto files of rdmad's gRPC API for clients in other languages.")
set(CPACK_DEBIAN_LIBS_DESCRIPTION
    "client library of rdmad, the per-node RDMA resource daemon\nThe shared library (librdmad_client.so.0) through which applications use\nrdmad's registered buffers, shared-memory queues and one-sided transfers.\nIt exports the public API of rdmad/client.h only.")
# A shlibs file for librdmad-client0 (dpkg-shlibdeps of what links it);
# its ldconfig trigger comes with the control files below.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY "=")
set(CPACK_DEBIAN_LIBS_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/cmake/deb/libs/triggers)
set(CPACK_PACKAGE_NAME rdmad)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "${RDMAD_MAINTAINER}")
# No CPACK_PACKAGE_DESCRIPTION_SUMMARY: CPackDeb would prepend it to every
# component's description; each description's first line is its summary.
set(CPACK_DEBIAN_UNSPECIFIED_DESCRIPTION
    "per-node daemon that owns RDMA resources for local clients\nrdmad owns a node's RDMA resources (protection domains, memory regions,\ncompletion queues, pools of RC queue pairs) on behalf of local client\nprocesses, exchanges connection parameters with other nodes' daemons over\ngRPC, and runs one-sided RDMA WRITE/READ for its clients. Where a node has\nno RDMA device a TCP transport offers the same semantics. Includes the\nrdmactl command line.")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# Where dpkg-shlibdeps finds librdmad_client.so.0 for python3-rdmad's
# extension (the package depends on librdmad-client0 itself, above).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${CMAKE_BINARY_DIR}/client)
# The verbs providers (mlx5, rxe...) are plugins libibverbs loads at run
# time; dpkg-shlibdeps cannot see them.
# bash-completion loads rdmactl's completion file.
# The maintainer scripts enable and restart the unit through
# deb-systemd-helper and deb-systemd-invoke (the libraries' dependencies
# come from dpkg-shlibdeps and are added to this).
set(CPACK_DEBIAN_UNSPECIFIED_PACKAGE_DEPENDS "init-system-helpers (>= 1.54~)")
set(CPACK_DEBIAN_UNSPECIFIED_PACKAGE_RECOMMENDS
    "ibverbs-providers, rdma-core, bash-completion")
# Maintainer scripts and the conffile belong to rdmad only.
set(CPACK_DEBIAN_UNSPECIFIED_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/cmake/deb/conffiles
    ${PROJECT_SOURCE_DIR}/cmake/deb/postinst
    ${PROJECT_SOURCE_DIR}/cmake/deb/prerm
    ${PROJECT_SOURCE_DIR}/cmake/deb/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# Debug info stays in the build tree; the package carries stripped binaries.
set(CPACK_STRIP_FILES ON)
include(CPack)
