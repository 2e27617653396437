// TransportKind on the wire (daemon/peer/transport_kind_proto.h): the two
// transports that cross it go both ways, the rest go out as unspecified and
// any number the wire does not know comes in as kNone.
#include "daemon/peer/transport_kind_proto.h"

#include "gtest/gtest.h"

namespace rdmad::peer {
namespace {

TEST(TransportKindProtoTest, WireTransportsRoundTrip) {
  for (core::TransportKind kind :
       {core::TransportKind::kVerbs, core::TransportKind::kTcp}) {
    SCOPED_TRACE(core::TransportKindName(kind));
    EXPECT_EQ(FromProto(ToProto(kind)), kind);
  }
  EXPECT_EQ(ToProto(core::TransportKind::kVerbs), v1::TRANSPORT_VERBS);
  EXPECT_EQ(ToProto(core::TransportKind::kTcp), v1::TRANSPORT_TCP);
}

TEST(TransportKindProtoTest, KindsThatStayHomeGoOutUnspecified) {
  EXPECT_EQ(ToProto(core::TransportKind::kNone), v1::TRANSPORT_UNSPECIFIED);
  EXPECT_EQ(ToProto(core::TransportKind::kLocal), v1::TRANSPORT_UNSPECIFIED);
}

TEST(TransportKindProtoTest, UnknownNumbersComeInAsNone) {
  EXPECT_EQ(FromProto(v1::TRANSPORT_UNSPECIFIED), core::TransportKind::kNone);
  EXPECT_EQ(FromProto(99), core::TransportKind::kNone);
  EXPECT_EQ(FromProto(-1), core::TransportKind::kNone);
}

}  // namespace
}  // namespace rdmad::peer
