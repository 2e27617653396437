// Owning handles for libibverbs objects.
//
// Every ibv_* object the daemon creates is held by a `std::unique_ptr` with
// `VerbsDeleter`, which has one `operator()` per object type and calls the
// matching ibv_destroy_*/ibv_dealloc_*/ibv_dereg_*/ibv_close_* function. A
// destroy call can fail only when a child object still uses the parent (for
// example a QP still attached to the CQ being destroyed); that is a
// programming error in rdmad, so the deleter logs it loudly and leaks the
// object rather than aborting the daemon.
//
// Order: verbs objects form a tree (context -> PD/channel -> CQ -> QP, PD ->
// MR, PD -> SRQ -> QP). Classes that hold several handles declare them
// parent-first, so the members are destroyed child-first. Classes that hold a child without its
// parent keep the parent alive with a `std::shared_ptr` to its owner.
//
// Example:
//   PdHandle pd(ibv_alloc_pd(context));
//   if (pd == nullptr) return absl::ErrnoToStatus(errno, "ibv_alloc_pd");
//   // ibv_dealloc_pd runs when `pd` goes out of scope.
//
// Thread-safety: handles are plain unique_ptrs; the deleters are stateless
// and may run on any thread.
#ifndef RDMAD_DAEMON_TRANSPORT_VERBS_HANDLES_H_
#define RDMAD_DAEMON_TRANSPORT_VERBS_HANDLES_H_

#include <infiniband/verbs.h>

#include <memory>

namespace rdmad::verbs {

// Destroys one verbs object of the matching type. A null pointer is a no-op
// (std::unique_ptr never calls the deleter with null anyway).
struct VerbsDeleter {
  void operator()(ibv_context* context) const;
  void operator()(ibv_pd* pd) const;
  void operator()(ibv_mr* mr) const;
  void operator()(ibv_comp_channel* channel) const;
  void operator()(ibv_cq* cq) const;
  void operator()(ibv_qp* qp) const;
  void operator()(ibv_srq* srq) const;
};

using ContextHandle = std::unique_ptr<ibv_context, VerbsDeleter>;
using PdHandle = std::unique_ptr<ibv_pd, VerbsDeleter>;
using MrHandle = std::unique_ptr<ibv_mr, VerbsDeleter>;
using CompChannelHandle = std::unique_ptr<ibv_comp_channel, VerbsDeleter>;
using CqHandle = std::unique_ptr<ibv_cq, VerbsDeleter>;
using QpHandle = std::unique_ptr<ibv_qp, VerbsDeleter>;
using SrqHandle = std::unique_ptr<ibv_srq, VerbsDeleter>;

// Owns the array returned by ibv_get_device_list (not the devices in it,
// which libibverbs owns).
struct DeviceListDeleter {
  void operator()(ibv_device** list) const { ibv_free_device_list(list); }
};
using DeviceListHandle = std::unique_ptr<ibv_device*, DeviceListDeleter>;

}  // namespace rdmad::verbs

#endif  // RDMAD_DAEMON_TRANSPORT_VERBS_HANDLES_H_
