// RegionObserver: told when the remote visibility of a named region may
// have changed, so that something outside the core (the cluster directory)
// can follow exports without the RegionTable knowing about it.
#ifndef RDMAD_DAEMON_CORE_REGION_OBSERVER_H_
#define RDMAD_DAEMON_CORE_REGION_OBSERVER_H_

#include <string>

namespace rdmad::core {

class RegionObserver {
 public:
  virtual ~RegionObserver() = default;
  // The region named `name` was exported, re-exported, unexported or freed.
  // Carries only the name: the observer reads the table for the current
  // state, so that two events racing each other cannot leave it with the
  // older one. Called outside the table's lock, on the thread that made the
  // change (a gRPC or session thread): must not block.
  virtual void OnRegionChanged(const std::string& name) = 0;
};

}  // namespace rdmad::core

#endif  // RDMAD_DAEMON_CORE_REGION_OBSERVER_H_
