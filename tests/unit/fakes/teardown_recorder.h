// For tests of where regions are torn down (core::RegionReleaser):
//
//   TeardownRecorder    a core::MemoryRegistrar whose registrations have no
//                       keys (as core::NullRegistrar's) and note the name
//                       of the thread each was dropped on: the thread that
//                       tore its region down.
//   RunOnServingThread  runs a function on a new thread, named and marked
//                       as serving (common/serving_thread.h) as an event
//                       loop's is, and waits for it.
#ifndef RDMAD_TESTS_UNIT_FAKES_TEARDOWN_RECORDER_H_
#define RDMAD_TESTS_UNIT_FAKES_TEARDOWN_RECORDER_H_

#include <pthread.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/serving_thread.h"
#include "daemon/core/memory_registrar.h"

namespace rdmad::core::testing {

class TeardownRecorder final : public MemoryRegistrar {
 public:
  class Recorded final : public Registration {
   public:
    explicit Recorded(TeardownRecorder* owner) : owner_(owner) {}
    ~Recorded() override {
      char name[16] = {};
      ::pthread_getname_np(::pthread_self(), name, sizeof(name));
      absl::MutexLock lock(&owner_->mu_);
      owner_->threads_.push_back(name);
    }
    const std::vector<DeviceRegistration>& keys() const override {
      return keys_;
    }

   private:
    TeardownRecorder* owner_;
    std::vector<DeviceRegistration> keys_;
  };

  absl::StatusOr<std::unique_ptr<Registration>> Register(
      void*, size_t, RemoteAccess) override {
    return std::make_unique<Recorded>(this);
  }
  // The names (at most 15 characters) of the threads registrations were
  // dropped on, in order.
  std::vector<std::string> threads() const {
    absl::MutexLock lock(&mu_);
    return threads_;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<std::string> threads_ ABSL_GUARDED_BY(mu_);
};

template <typename Fn>
void RunOnServingThread(const char* name, Fn fn) {
  std::thread t([&] {
    ::pthread_setname_np(::pthread_self(), name);
    MarkServingThread();
    fn();
  });
  t.join();
}

}  // namespace rdmad::core::testing

#endif  // RDMAD_TESTS_UNIT_FAKES_TEARDOWN_RECORDER_H_
