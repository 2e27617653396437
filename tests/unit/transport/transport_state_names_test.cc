// The words ListPeers, ListQps and the metrics show for the transport
// layer's states: one per state, distinct, and the ones clients and
// dashboards already read.
#include <set>
#include <string>

#include "daemon/transport/transport.h"
#include "gtest/gtest.h"

namespace rdmad::transport {
namespace {

TEST(TransportStateNamesTest, EachRailStatusHasItsWord) {
  EXPECT_EQ(RailStatusName(RailStatus::kActive), "ACTIVE");
  EXPECT_EQ(RailStatusName(RailStatus::kProbing), "PROBING");
  EXPECT_EQ(RailStatusName(RailStatus::kPaused), "PAUSED");
  EXPECT_EQ(RailStatusName(RailStatus::kRebuilding), "REBUILDING");
}

TEST(TransportStateNamesTest, EachConnectionAndChannelStateHasItsWord) {
  std::set<std::string> words;
  for (ConnectionState s :
       {ConnectionState::kIdle, ConnectionState::kConnecting,
        ConnectionState::kReady, ConnectionState::kError,
        ConnectionState::kClosed}) {
    words.insert(std::string(ConnectionStateName(s)));
  }
  EXPECT_EQ(words, (std::set<std::string>{"IDLE", "CONNECTING", "READY",
                                          "ERROR", "CLOSED"}));
  words.clear();
  for (ChannelState s : {ChannelState::kReady, ChannelState::kDegraded,
                         ChannelState::kError, ChannelState::kClosed}) {
    words.insert(std::string(ChannelStateName(s)));
  }
  EXPECT_EQ(words,
            (std::set<std::string>{"READY", "DEGRADED", "ERROR", "CLOSED"}));
}

}  // namespace
}  // namespace rdmad::transport
