// DirectoryCalls, served in process over a fake cluster directory as the
// Local service serves them: ListClusterRegions and LookupRegion pass the
// request through and convert the answer, carry the directory's errors as
// they are, and tell a daemon without a directory how to get one.
#include "daemon/service/directory_calls.h"

#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/fakes/directory_fake.h"
#include "tests/unit/fakes/service_fakes.h"

namespace rdmad::service {
namespace {

using ::testing::HasSubstr;
using directory::testing::FakeDirectory;
using testing::InProcessServer;

// The Local service's directory calls alone.
class DirectoryOnlyService final : public v1::Local::CallbackService {
 public:
  explicit DirectoryOnlyService(directory::ClusterDirectory* directory)
      : calls_(directory) {}

  grpc::ServerUnaryReactor* ListClusterRegions(
      grpc::CallbackServerContext* context,
      const v1::ListClusterRegionsRequest* request,
      v1::ListClusterRegionsResponse* response) override {
    return calls_.ListClusterRegions(context, request, response);
  }
  grpc::ServerUnaryReactor* LookupRegion(
      grpc::CallbackServerContext* context,
      const v1::LookupRegionRequest* request,
      v1::LookupRegionResponse* response) override {
    return calls_.LookupRegion(context, request, response);
  }

 private:
  const DirectoryCalls calls_;
};

core::DirectoryEntry Entry(const std::string& name) {
  core::DirectoryEntry entry;
  entry.name = name;
  entry.node = "127.0.0.1:7471";
  entry.size = 4096;
  entry.access = core::RemoteAccess::kRead;
  entry.region_id = 12;
  entry.generation = {.incarnation = 34, .revision = 56};
  entry.exported = absl::FromUnixMillis(1700000000000);
  return entry;
}

class DirectoryCallsTest : public ::testing::Test {
 protected:
  void Start(directory::ClusterDirectory* directory) {
    service_ = std::make_unique<DirectoryOnlyService>(directory);
    server_ = std::make_unique<InProcessServer>(service_.get());
    stub_ = v1::Local::NewStub(server_->channel());
  }

  grpc::Status Lookup(const std::string& name, bool fresh,
                      v1::LookupRegionResponse* response) {
    grpc::ClientContext context;
    v1::LookupRegionRequest request;
    request.set_name(name);
    request.set_fresh(fresh);
    return stub_->LookupRegion(&context, request, response);
  }
  grpc::Status List(const std::string& prefix,
                    v1::ListClusterRegionsResponse* response) {
    grpc::ClientContext context;
    v1::ListClusterRegionsRequest request;
    request.set_prefix(prefix);
    return stub_->ListClusterRegions(&context, request, response);
  }

  FakeDirectory directory_;
  std::unique_ptr<DirectoryOnlyService> service_;
  std::unique_ptr<InProcessServer> server_;
  std::unique_ptr<v1::Local::Stub> stub_;
};

TEST_F(DirectoryCallsTest, LookupAnswersWhatTheDirectoryFound) {
  directory_.entry = Entry("kv/a");
  directory_.from_cache = true;
  Start(&directory_);
  v1::LookupRegionResponse response;
  grpc::Status status = Lookup("kv/a", true, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(directory_.asked_name, "kv/a");
  EXPECT_EQ(directory_.asked_fresh, true);
  EXPECT_EQ(response.region().name(), "kv/a");
  EXPECT_EQ(response.region().node(), "127.0.0.1:7471");
  EXPECT_EQ(response.region().size(), 4096u);
  EXPECT_EQ(response.region().access(), v1::ACCESS_READ);
  EXPECT_EQ(response.region().region_id(), 12u);
  EXPECT_EQ(response.region().incarnation(), 34u);
  EXPECT_EQ(response.region().revision(), 56);
  EXPECT_EQ(response.region().exported_unix_ms(), 1700000000000);
  EXPECT_TRUE(response.from_cache());
  EXPECT_GE(response.latency_ns(), 0);
}

TEST_F(DirectoryCallsTest, ListAnswersTheListing) {
  directory::DirectoryListing listing;
  listing.entries = {Entry("kv/a"), Entry("kv/b")};
  listing.revision = 99;
  listing.truncated = true;
  listing.unreadable = 2;
  directory_.listing = listing;
  Start(&directory_);
  v1::ListClusterRegionsResponse response;
  grpc::Status status = List("kv/", &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(directory_.asked_prefix, "kv/");
  ASSERT_EQ(response.regions_size(), 2);
  EXPECT_EQ(response.regions(0).name(), "kv/a");
  EXPECT_EQ(response.regions(1).name(), "kv/b");
  EXPECT_EQ(response.revision(), 99);
  EXPECT_TRUE(response.truncated());
  EXPECT_EQ(response.unreadable(), 2u);
}

TEST_F(DirectoryCallsTest, CarriesTheDirectorysErrors) {
  directory_.entry = absl::NotFoundError("no region 'kv/z' in the cluster");
  directory_.listing = absl::UnavailableError("etcd at 127.0.0.1:2379: down");
  Start(&directory_);
  v1::LookupRegionResponse lookup;
  grpc::Status status = Lookup("kv/z", false, &lookup);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(status.error_message(), "no region 'kv/z' in the cluster");
  EXPECT_FALSE(lookup.has_region());
  v1::ListClusterRegionsResponse list;
  status = List("", &list);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(status.error_message(), HasSubstr("down"));
  EXPECT_EQ(list.regions_size(), 0);
}

TEST_F(DirectoryCallsTest, WithoutADirectorySaysHowToSetOneUp) {
  Start(nullptr);
  v1::LookupRegionResponse lookup;
  v1::ListClusterRegionsResponse list;
  for (const grpc::Status& status :
       {Lookup("kv/a", false, &lookup), List("kv/", &list)}) {
    EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_THAT(status.error_message(),
                HasSubstr("this daemon has no cluster directory"));
    EXPECT_THAT(status.error_message(), HasSubstr("--directory"));
  }
}

}  // namespace
}  // namespace rdmad::service
