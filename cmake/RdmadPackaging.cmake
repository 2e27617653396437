# Installation layout and the Debian package (CPack DEB).
#
#   scripts/package.sh        builds build-pkg/rdmad_<version>_<arch>.deb
#
# One package, "rdmad": the daemon and rdmactl, the systemd unit with its
# sysusers.d and tmpfiles.d files, the default configuration (a conffile, so
# local edits survive upgrades), man pages and bash completion. Runtime
# dependencies come from dpkg-shlibdeps. The maintainer scripts create the
# user and directory and reload systemd, but neither enable nor start the
# service: an RDMA node needs its config looked at first
# (`systemctl enable --now rdmad`).

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

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME rdmad)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_PACKAGE_CONTACT "rdmad maintainers <rdmad@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "per-node daemon that owns RDMA resources for local clients")
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
    "rdmad owns a node's RDMA resources (protection domains, memory regions,\n completion queues, pools of RC queue pairs) on behalf of local client\n processes, exchanges connection parameters with other nodes' daemons over\n gRPC, and runs one-sided RDMA WRITE/READ for its clients. Where a node has\n no RDMA device a TCP transport offers the same semantics. Includes the\n rdmactl command line.")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# The verbs providers (mlx5, rxe...) are plugins libibverbs loads at run
# time; dpkg-shlibdeps cannot see them.
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "ibverbs-providers, rdma-core")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/cmake/deb/conffiles
    ${PROJECT_SOURCE_DIR}/cmake/deb/postinst
    ${PROJECT_SOURCE_DIR}/cmake/deb/prerm
    ${PROJECT_SOURCE_DIR}/cmake/deb/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# Debug info stays in the build tree; the package carries stripped binaries.
set(CPACK_STRIP_FILES ON)
include(CPack)
