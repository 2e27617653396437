#include "tests/integration/vgem_buffer.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/ioctl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace rdmad::testing {
namespace {

// The kernel's DRM uapi (include/uapi/drm/drm.h, drm_mode.h): the two
// structures and ioctls this helper needs.
struct DrmModeCreateDumb {
  uint32_t height;
  uint32_t width;
  uint32_t bpp;
  uint32_t flags;
  uint32_t handle;  // out
  uint32_t pitch;   // out
  uint64_t size;    // out
};
static_assert(sizeof(DrmModeCreateDumb) == 32);

struct DrmPrimeHandle {
  uint32_t handle;
  uint32_t flags;  // DRM_CLOEXEC (O_CLOEXEC) | DRM_RDWR (O_RDWR)
  int32_t fd;      // out
};
static_assert(sizeof(DrmPrimeHandle) == 12);

constexpr char kDrmIoctlBase = 'd';
constexpr unsigned long kDrmIoctlModeCreateDumb =
    _IOWR(kDrmIoctlBase, 0xB2, DrmModeCreateDumb);
constexpr unsigned long kDrmIoctlPrimeHandleToFd =
    _IOWR(kDrmIoctlBase, 0x2d, DrmPrimeHandle);

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

absl::StatusOr<std::string> FindVgemCard() {
  DIR* dir = ::opendir("/sys/class/drm");
  if (dir != nullptr) {
    while (dirent* e = ::readdir(dir)) {
      const std::string name = e->d_name;
      if (!absl::StartsWith(name, "card") || absl::StrContains(name, "-")) {
        continue;
      }
      const std::string uevent =
          ReadFile(absl::StrCat("/sys/class/drm/", name, "/device/uevent"));
      if (absl::StrContains(uevent, "vgem")) {
        ::closedir(dir);
        return absl::StrCat("/dev/dri/", name);
      }
    }
    ::closedir(dir);
  }
  return absl::NotFoundError(
      "no vgem DRM device (/sys/class/drm/card*/device is not vgem): load "
      "the kernel's virtual GEM driver with 'modprobe vgem' (the soft-RoCE "
      "lab VM does)");
}

absl::StatusOr<VgemBuffer> VgemBuffer::Create(uint64_t size) {
  auto card_path = FindVgemCard();
  if (!card_path.ok()) return card_path.status();
  VgemBuffer buffer;
  buffer.card_.reset(::open(card_path->c_str(), O_RDWR | O_CLOEXEC));
  if (!buffer.card_) {
    return absl::ErrnoToStatus(errno, absl::StrCat("open ", *card_path));
  }
  // One row of 4-byte pixels as wide as the buffer, in pages.
  const uint64_t pages = (size + 4095) / 4096;
  DrmModeCreateDumb create{};
  create.height = static_cast<uint32_t>(pages);
  create.width = 1024;
  create.bpp = 32;
  if (::ioctl(buffer.card_.get(), kDrmIoctlModeCreateDumb, &create) != 0) {
    return absl::ErrnoToStatus(errno, "DRM_IOCTL_MODE_CREATE_DUMB");
  }
  DrmPrimeHandle prime{};
  prime.handle = create.handle;
  prime.flags = O_CLOEXEC | O_RDWR;
  prime.fd = -1;
  if (::ioctl(buffer.card_.get(), kDrmIoctlPrimeHandleToFd, &prime) != 0) {
    return absl::ErrnoToStatus(errno, "DRM_IOCTL_PRIME_HANDLE_TO_FD");
  }
  buffer.dmabuf_.reset(prime.fd);
  void* data = ::mmap(nullptr, create.size, PROT_READ | PROT_WRITE, MAP_SHARED,
                      prime.fd, 0);
  if (data == MAP_FAILED) {
    return absl::ErrnoToStatus(errno, "mmap of the vgem dma-buf");
  }
  buffer.data_ = static_cast<char*>(data);
  buffer.size_ = create.size;
  return buffer;
}

VgemBuffer::VgemBuffer(VgemBuffer&& other) noexcept {
  *this = std::move(other);
}

VgemBuffer& VgemBuffer::operator=(VgemBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) ::munmap(data_, size_);
    card_ = std::move(other.card_);
    dmabuf_ = std::move(other.dmabuf_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

VgemBuffer::~VgemBuffer() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

}  // namespace rdmad::testing
