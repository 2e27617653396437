#include "daemon/transport/verbs/handles.h"

#include <cerrno>
#include <cstring>

#include "spdlog/spdlog.h"

namespace rdmad::verbs {
namespace {

// Destroy calls return an errno value (or -1 and errno for ibv_close_device).
// They fail only while a child still uses the object; say so, because the
// object then leaks until the process exits.
void LogDestroyFailure(const char* call, int error) {
  spdlog::error(
      "{} failed: {} (errno {}). A child object still uses it, so it leaks "
      "until rdmad exits; this is a bug in rdmad's destruction order, please "
      "report it",
      call, std::strerror(error), error);
}

}  // namespace

void VerbsDeleter::operator()(ibv_context* context) const {
  if (context == nullptr) return;
  if (ibv_close_device(context) != 0) {
    LogDestroyFailure("ibv_close_device", errno);
  }
}

void VerbsDeleter::operator()(ibv_pd* pd) const {
  if (pd == nullptr) return;
  if (int rc = ibv_dealloc_pd(pd); rc != 0) {
    LogDestroyFailure("ibv_dealloc_pd", rc);
  }
}

void VerbsDeleter::operator()(ibv_mr* mr) const {
  if (mr == nullptr) return;
  if (int rc = ibv_dereg_mr(mr); rc != 0) {
    LogDestroyFailure("ibv_dereg_mr", rc);
  }
}

void VerbsDeleter::operator()(ibv_comp_channel* channel) const {
  if (channel == nullptr) return;
  if (int rc = ibv_destroy_comp_channel(channel); rc != 0) {
    LogDestroyFailure("ibv_destroy_comp_channel", rc);
  }
}

void VerbsDeleter::operator()(ibv_cq* cq) const {
  if (cq == nullptr) return;
  if (int rc = ibv_destroy_cq(cq); rc != 0) {
    LogDestroyFailure("ibv_destroy_cq", rc);
  }
}

void VerbsDeleter::operator()(ibv_qp* qp) const {
  if (qp == nullptr) return;
  if (int rc = ibv_destroy_qp(qp); rc != 0) {
    LogDestroyFailure("ibv_destroy_qp", rc);
  }
}

void VerbsDeleter::operator()(ibv_srq* srq) const {
  if (srq == nullptr) return;
  if (int rc = ibv_destroy_srq(srq); rc != 0) {
    LogDestroyFailure("ibv_destroy_srq", rc);
  }
}

}  // namespace rdmad::verbs
