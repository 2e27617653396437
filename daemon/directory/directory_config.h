// Builds the cluster directory from the daemon's config (the `directory*`
// fields of rdmad.v1.DaemonConfig): reads the TLS and password files and
// checks what CheckConfig cannot (that they exist and hold PEM).
#ifndef RDMAD_DAEMON_DIRECTORY_DIRECTORY_CONFIG_H_
#define RDMAD_DAEMON_DIRECTORY_DIRECTORY_CONFIG_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/core/region_table.h"
#include "daemon/directory/etcd_directory.h"
#include "rdmad/v1/config.pb.h"
#include "rdmad/v1/directory.pb.h"

namespace rdmad::directory {

// The directory configured by `config`, not yet started; null when
// `config.directory` is empty. `self` describes this daemon (its Peer
// address, incarnation...); `identity` is its certificate identity (empty
// without mutual TLS). `regions` is not owned and must outlive it.
absl::StatusOr<std::unique_ptr<EtcdDirectory>> CreateFromConfig(
    const v1::DaemonConfig& config, const v1::DirectoryNodeRecord& self,
    const std::string& identity, const core::RegionTable* regions);

// Why names in this daemon's directory can be claimed by anyone who can
// write to etcd, for the warning at start: "" when etcd authentication
// (directory_user, or a client certificate) or mutual TLS between daemons
// (`mutual_tls`) is configured, or there is no directory.
std::string UnprotectedNamesWarning(const v1::DaemonConfig& config,
                                    bool mutual_tls);

}  // namespace rdmad::directory

#endif  // RDMAD_DAEMON_DIRECTORY_DIRECTORY_CONFIG_H_
