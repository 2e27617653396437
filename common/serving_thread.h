// Serving threads: threads whose every pause delays many clients at once.
//
// rdmad's event loops (daemon/runtime) run the operations of every client
// queue, data connection and completion queue placed on them, one after
// another, within microseconds each. Work that can take milliseconds and
// need not happen there (tearing down a large region: core::RegionReleaser)
// asks OnServingThread() and, on one, is handed to a thread of its own.
//
// Example:
//   void EventLoop::Run() {
//     MarkServingThread();
//     ...
//   }
//   if (OnServingThread()) releaser->Release(std::move(region));
#ifndef RDMAD_COMMON_SERVING_THREAD_H_
#define RDMAD_COMMON_SERVING_THREAD_H_

namespace rdmad {

// Marks the calling thread as a serving thread for the rest of its life.
void MarkServingThread();

// Whether MarkServingThread() was called on the calling thread.
bool OnServingThread();

}  // namespace rdmad

#endif  // RDMAD_COMMON_SERVING_THREAD_H_
