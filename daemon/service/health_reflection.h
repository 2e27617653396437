// Makes grpc.health.v1.Health describable by server reflection.
//
// gRPC's built-in health service (grpc::EnableDefaultHealthCheckService)
// does not register protobuf descriptors, so reflection listed the service
// but answered "Symbol not found" when a generic client (grpcurl, grpc_cli)
// asked for it. The descriptors come from proto/grpc/health/v1/health.proto,
// compiled into rdmad; this function makes sure the linker keeps them.
#ifndef RDMAD_DAEMON_SERVICE_HEALTH_REFLECTION_H_
#define RDMAD_DAEMON_SERVICE_HEALTH_REFLECTION_H_

namespace rdmad::service {

// Registers grpc.health.v1 in protobuf's generated descriptor pool, where
// the reflection service looks symbols up. Call before serving; idempotent.
void RegisterHealthDescriptors();

}  // namespace rdmad::service

#endif  // RDMAD_DAEMON_SERVICE_HEALTH_REFLECTION_H_
