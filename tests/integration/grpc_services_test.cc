// Standard gRPC services on both listeners of a real rdmad: health checking
// (what grpc_health_probe asks) and server reflection (what grpcurl uses),
// spoken by clients of our own.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"
#include "google/protobuf/dynamic_message.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/support/byte_buffer.h"
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

// What a generic client (grpcurl, grpc_cli) gets from reflection for
// `symbol`: the serialized FileDescriptorProtos, or none.
std::vector<std::string> FilesContaining(const std::string& target,
                                         const std::string& symbol) {
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
  std::vector<std::string> files;
  while (stream->Read(&response)) {
    for (const std::string& file :
         response.file_descriptor_response().file_descriptor_proto()) {
      files.push_back(file);
    }
  }
  (void)stream->Finish();
  return files;
}

bool DescribesSymbol(const std::string& target, const std::string& symbol) {
  return !FilesContaining(target, symbol).empty();
}

// Calls `method` ("grpc.health.v1.Health.Check") the way a generic client
// does: knowing nothing but what reflection describes. Returns the answer's
// field `field` as text (an enum by name), or an error.
absl::StatusOr<std::string> CallThroughReflection(
    const std::string& target, const std::string& service,
    const std::string& method, const std::string& request_text_field,
    const std::string& request_value, const std::string& field) {
  google::protobuf::DescriptorPool pool;
  for (const std::string& bytes : FilesContaining(target, service)) {
    google::protobuf::FileDescriptorProto file;
    if (!file.ParseFromString(bytes)) {
      return absl::DataLossError("reflection sent a malformed descriptor");
    }
    pool.BuildFile(file);
  }
  const google::protobuf::ServiceDescriptor* described =
      pool.FindServiceByName(service);
  if (described == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("reflection does not describe ", service));
  }
  const google::protobuf::MethodDescriptor* rpc =
      described->FindMethodByName(method);
  if (rpc == nullptr) return absl::NotFoundError("no such method");
  google::protobuf::DynamicMessageFactory factory(&pool);
  std::unique_ptr<google::protobuf::Message> request(
      factory.GetPrototype(rpc->input_type())->New());
  request->GetReflection()->SetString(
      request.get(), rpc->input_type()->FindFieldByName(request_text_field),
      request_value);
  std::string serialized;
  request->SerializeToString(&serialized);
  grpc::Slice slice(serialized);
  grpc::ByteBuffer send(&slice, 1);
  grpc::ByteBuffer received;
  grpc::GenericStub stub(Channel(target));
  grpc::ClientContext context;
  WithDeadline(context);
  absl::Notification done;
  grpc::Status status;
  stub.UnaryCall(&context, absl::StrCat("/", service, "/", method),
                 grpc::StubOptions(), &send, &received,
                 [&](grpc::Status s) {
                   status = std::move(s);
                   done.Notify();
                 });
  done.WaitForNotification();
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                        status.error_message());
  }
  std::vector<grpc::Slice> slices;
  (void)received.Dump(&slices);
  std::string bytes;
  for (const grpc::Slice& s : slices) {
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  std::unique_ptr<google::protobuf::Message> response(
      factory.GetPrototype(rpc->output_type())->New());
  if (!response->ParseFromString(bytes)) {
    return absl::DataLossError("cannot parse the answer");
  }
  const google::protobuf::FieldDescriptor* out =
      rpc->output_type()->FindFieldByName(field);
  if (out == nullptr) return absl::NotFoundError("no such field");
  const auto* reflection = response->GetReflection();
  return out->type() == google::protobuf::FieldDescriptor::TYPE_ENUM
             ? reflection->GetEnum(*response, out)->name()
             : reflection->GetString(*response, out);
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
  EXPECT_TRUE(DescribesSymbol(local_, "grpc.health.v1.Health"));
  EXPECT_TRUE(DescribesSymbol(peer_, "grpc.health.v1.Health.Check"));
}

// grpcurl -plaintext HOST:PORT grpc.health.v1.Health/Check works: a client
// that knows only what reflection tells it can call the health service.
TEST_F(GrpcServicesTest, GenericClientCallsHealthThroughReflection) {
  for (const auto& [target, service] :
       {std::pair{local_, "rdmad.v1.Local"}, std::pair{peer_, "rdmad.v1.Peer"}}) {
    auto status = CallThroughReflection(target, "grpc.health.v1.Health",
                                        "Check", "service", service, "status");
    ASSERT_TRUE(status.ok()) << target << ": " << status.status();
    EXPECT_EQ(*status, "SERVING") << target;
  }
}

}  // namespace
}  // namespace rdmad::testing
