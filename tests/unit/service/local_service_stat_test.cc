// LocalService's calls that describe regions from elsewhere, served in
// process over in-memory tables and fakes (local_service_fixture.h):
// StatRegion of a name here, in the cluster directory or at a peer, and of
// a descriptor; ListRemoteRegions through the daemon's questions to other
// daemons, whose answers are not trusted.
#include <string>

#include "daemon/peer/descriptor_codec.h"
#include "daemon/service/local_service.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/fakes/local_service_fixture.h"

namespace rdmad::service {
namespace {

using ::testing::HasSubstr;
using testing::kIncarnation;
using testing::kOtherPeer;
using testing::LocalServiceTest;
using Stub = v1::Local::Stub;

TEST_F(LocalServiceTest, StatRegionHereThroughTheDirectoryAndAtAPeer) {
  InTheCluster("elsewhere", 512, core::RemoteAccess::kRead);
  v1::ResolveResponse resolved;
  resolved.mutable_region()->set_name("spoofed\n");
  resolved.mutable_region()->set_length(2048);
  resolved.mutable_region()->set_access(v1::ACCESS_WRITE);
  inspection_.resolve = resolved;
  StartWithAll();
  const Client client = Open(1000);
  Allocate(CallerOf(client), "kv", 4096, 0600, core::RemoteAccess::kRead);

  v1::StatRegionRequest request;
  request.mutable_region()->set_name("kv");
  v1::StatRegionResponse here;
  ASSERT_TRUE(Call(&Stub::StatRegion, nullptr, request, &here).ok());
  EXPECT_EQ(here.region().length(), 4096u);
  EXPECT_EQ(here.region().access(), v1::ACCESS_READ);
  EXPECT_TRUE(here.peer().empty());

  request.mutable_region()->set_name("elsewhere");
  v1::StatRegionResponse found;
  ASSERT_TRUE(Call(&Stub::StatRegion, nullptr, request, &found).ok());
  EXPECT_EQ(found.peer(), kOtherPeer);
  EXPECT_EQ(found.region().length(), 512u);

  // At a peer, asked for the caller's uid; the name is the one asked for.
  request.mutable_region()->set_peer(kOtherPeer);
  request.mutable_region()->set_name("remote");
  v1::StatRegionResponse there;
  ASSERT_TRUE(Call(&Stub::StatRegion, &client, request, &there).ok());
  EXPECT_EQ(inspection_.asked_peer(), kOtherPeer);
  EXPECT_EQ(inspection_.asked_resolve().name(), "remote");
  EXPECT_EQ(inspection_.asked_resolve().uid(), 1000u);
  EXPECT_EQ(there.region().name(), "remote");
  EXPECT_EQ(there.region().length(), 2048u);
  EXPECT_EQ(there.region().access(), v1::ACCESS_WRITE);
}

TEST_F(LocalServiceTest, StatRegionRefusals) {
  Start();  // no directory: a name not here is not found
  v1::StatRegionRequest request;
  EXPECT_EQ(CodeOf(&Stub::StatRegion, nullptr, request),
            grpc::StatusCode::INVALID_ARGUMENT);
  request.mutable_region()->set_name("missing");
  EXPECT_EQ(CodeOf(&Stub::StatRegion, nullptr, request),
            grpc::StatusCode::NOT_FOUND);
  request.mutable_region()->set_peer("not an address");
  EXPECT_EQ(CodeOf(&Stub::StatRegion, nullptr, request),
            grpc::StatusCode::INVALID_ARGUMENT);
  request.mutable_region()->set_peer(kOtherPeer);
  inspection_.resolve = absl::NotFoundError("no region 'missing' there");
  EXPECT_EQ(CodeOf(&Stub::StatRegion, nullptr, request),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(LocalServiceTest, StatOfAnotherRunsDescriptorIsNotFound) {
  v1::RegionDescriptor descriptor;
  descriptor.set_peer(kOtherPeer);
  descriptor.set_incarnation(1);
  descriptor.set_region_id(5);
  descriptor.set_name("kv");
  descriptor.set_length(4096);
  v1::ResolveResponse now;
  now.mutable_region()->set_incarnation(2);  // the peer restarted
  now.mutable_region()->set_region_id(5);
  inspection_.resolve = now;
  Start();
  v1::StatRegionRequest request;
  request.mutable_region()->set_encoded_descriptor(
      peer::EncodeDescriptor(descriptor));
  v1::StatRegionResponse response;
  grpc::Status status = Call(&Stub::StatRegion, nullptr, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(status.error_message(), HasSubstr("restarted"));
  now.mutable_region()->set_incarnation(1);
  inspection_.resolve = now;
  EXPECT_TRUE(Call(&Stub::StatRegion, nullptr, request, &response).ok());
}

TEST_F(LocalServiceTest, ListRemoteRegionsPassesOnOnlyWhatIsWellFormed) {
  v1::ListExportsResponse answer;
  answer.add_regions()->set_name("good");
  answer.add_regions()->set_name("bad\x1b[2J");
  answer.set_next_page_token("page-1");  // the token it was asked with
  inspection_.exports = answer;
  Start();
  v1::ListRemoteRegionsRequest request;
  request.set_peer("not an address");
  v1::ListRemoteRegionsResponse response;
  EXPECT_EQ(CodeOf(&Stub::ListRemoteRegions, nullptr, request),
            grpc::StatusCode::INVALID_ARGUMENT);
  request.set_peer(kOtherPeer);
  request.set_page_token("page-1");
  ASSERT_TRUE(Call(&Stub::ListRemoteRegions, nullptr, request, &response).ok());
  EXPECT_EQ(inspection_.asked_list().incarnation(), kIncarnation);
  ASSERT_EQ(response.regions_size(), 1);
  EXPECT_EQ(response.regions(0).name(), "good");
  // A page that does not move on ends the listing.
  EXPECT_TRUE(response.next_page_token().empty());
  inspection_.exports = absl::UnavailableError("cannot reach it");
  EXPECT_EQ(CodeOf(&Stub::ListRemoteRegions, nullptr, request),
            grpc::StatusCode::UNAVAILABLE);
}

}  // namespace
}  // namespace rdmad::service
