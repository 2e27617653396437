#include "daemon/service/health_reflection.h"

#include "grpc/health/v1/health.pb.h"

namespace rdmad::service {

void RegisterHealthDescriptors() {
  // Naming a descriptor pulls health.pb.cc (and its registration with the
  // generated pool) out of the static library into the binary.
  (void)grpc::health::v1::HealthCheckRequest::descriptor();
}

}  // namespace rdmad::service
