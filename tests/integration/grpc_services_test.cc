// Standard gRPC services on both listeners of a real rdmad: health checking
// (what grpc_health_probe asks) and server reflection (what grpcurl uses),
// spoken by clients of our own.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/integration/daemon_process.h"

namespace rdmad::testing {
namespace {

using ::testing::Contains;

std::shared_ptr<grpc::Channel> Channel(const std::string& target) {
  return grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
}

void WithDeadline(grpc::ClientContext& context) {
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
}

grpc::health::v1::HealthCheckResponse::ServingStatus Health(
    const std::string& target, const std::string& service) {
  auto stub = grpc::health::v1::Health::NewStub(Channel(target));
  grpc::ClientContext context;
  WithDeadline(context);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status = stub->Check(&context, request, &response);
  EXPECT_TRUE(status.ok()) << target << ": " << status.error_message();
  return response.status();
}

std::vector<std::string> ListServices(const std::string& target) {
  auto stub = grpc::reflection::v1alpha::ServerReflection::NewStub(
      Channel(target));
  grpc::ClientContext context;
  WithDeadline(context);
  auto stream = stub->ServerReflectionInfo(&context);
  grpc::reflection::v1alpha::ServerReflectionRequest request;
  request.set_list_services("");
  EXPECT_TRUE(stream->Write(request));
  stream->WritesDone();
  std::vector<std::string> names;
  grpc::reflection::v1alpha::ServerReflectionResponse response;
  while (stream->Read(&response)) {
    for (const auto& service : response.list_services_response().service()) {
      names.push_back(service.name());
    }
  }
  EXPECT_TRUE(stream->Finish().ok());
  return names;
}

bool DescribesSymbol(const std::string& target, const std::string& symbol) {
  auto stub = grpc::reflection::v1alpha::ServerReflection::NewStub(
      Channel(target));
  grpc::ClientContext context;
  WithDeadline(context);
  auto stream = stub->ServerReflectionInfo(&context);
  grpc::reflection::v1alpha::ServerReflectionRequest request;
  request.set_file_containing_symbol(symbol);
  stream->Write(request);
  stream->WritesDone();
  grpc::reflection::v1alpha::ServerReflectionResponse response;
  bool found = false;
  while (stream->Read(&response)) {
    found |= response.file_descriptor_response().file_descriptor_proto_size() > 0;
  }
  (void)stream->Finish();
  return found;
}

class GrpcServicesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = DaemonProcess::Start(dir_.path(), "d");
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = *std::move(d);
    local_ = absl::StrCat("unix:", daemon_->socket());
    peer_ = daemon_->peer_address();
  }
  TempDir dir_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::string local_;
  std::string peer_;
};

TEST_F(GrpcServicesTest, HealthServingOnBothListeners) {
  using Status = grpc::health::v1::HealthCheckResponse;
  EXPECT_EQ(Health(local_, ""), Status::SERVING);
  EXPECT_EQ(Health(peer_, ""), Status::SERVING);
  EXPECT_EQ(Health(local_, "rdmad.v1.Local"), Status::SERVING);
  EXPECT_EQ(Health(peer_, "rdmad.v1.Peer"), Status::SERVING);
}

TEST_F(GrpcServicesTest, ReflectionListsAndDescribesServices) {
  EXPECT_THAT(ListServices(local_), Contains("rdmad.v1.Local"));
  EXPECT_THAT(ListServices(local_), Contains("grpc.health.v1.Health"));
  EXPECT_THAT(ListServices(peer_), Contains("rdmad.v1.Peer"));
  EXPECT_TRUE(DescribesSymbol(local_, "rdmad.v1.Local"));
  EXPECT_TRUE(DescribesSymbol(peer_, "rdmad.v1.Peer.Resolve"));
}

}  // namespace
}  // namespace rdmad::testing
