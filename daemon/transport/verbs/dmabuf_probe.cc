#include "daemon/transport/verbs/dmabuf_probe.h"

#include <unistd.h>

#include <cerrno>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace rdmad::verbs {

core::DmabufCapability ProbeDmabuf(ibv_pd* pd, std::string device,
                                   std::string driver,
                                   const DmabufProbeVerbs& verbs) {
  errno = 0;
  ibv_mr* mr = verbs.reg_dmabuf_mr(pd, 0, 0, 0, -1, 0);
  const int error = errno;
  if (mr != nullptr) (void)verbs.dereg_mr(mr);
  return core::ClassifyDmabufProbe(std::move(device), std::move(driver),
                                   mr != nullptr, error);
}

std::string DeviceDriver(const std::string& device) {
  const std::string dir = absl::StrCat("/sys/class/infiniband/", device);
  char target[512] = {};
  const std::string link = dir + "/device/driver";
  const ssize_t n = ::readlink(link.c_str(), target, sizeof(target) - 1);
  if (n > 0) {
    const std::string path(target, static_cast<size_t>(n));
    const size_t slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
  }
  // A soft-RoCE device has no bus device, only the network device it sits
  // on ("parent", an attribute of rxe's).
  const std::string parent = dir + "/parent";
  if (::access(parent.c_str(), R_OK) == 0) return "rxe";
  return "";
}

}  // namespace rdmad::verbs
