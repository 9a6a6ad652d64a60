// What a microVM boots from, prepared once per host and cached under RuntimeConfig's
// vm_cache_dir (world-readable: the VMM runs unprivileged):
//   kernel-<hash of the module set>/  vmlinuz, modules/N-<name>.ko, version — from Debian's
//                   linux-image-cloud-amd64, fetched with apt-get download (never installed
//                   into the host's /boot), unpacked with dpkg-deb
//   initrd-<key>.cpio  spaced as /init plus those modules; key = spaced's and the kernel's hash
//   disks/<digest>.img  a template as an ext4 image (mkfs.ext4 -d)
// and each sandbox's disk: a reflink (FICLONE) of its template's image where the filesystem
// shares blocks (btrfs), a plain copy elsewhere.
//
// Thread-compatible: the caller (VmRuntime) serializes preparation.
#pragma once

#include <string>
#include <vector>

#include "common/result.h"
#include "runtime/runtime.h"

namespace space::runtime::vm {

// The modules the cloud kernel needs for our devices (disk, channel, NIC), in load order.
inline constexpr const char* kGuestModules[] = {"virtio_ring", "virtio",   "virtio_mmio",  "virtio_console",
                                                "virtio_blk",  "failover", "net_failover", "virtio_net"};

struct GuestKernel {
  std::string dir;      // <cache>/kernel-<hash>
  std::string vmlinuz;  // <dir>/vmlinuz
  std::string version;  // "6.1.0-57-cloud-amd64"
  std::vector<std::string> modules;  // <dir>/modules/N-<name>.ko, in load order
};

// Fetches and unpacks the kernel unless the cache has it.
Result<GuestKernel> EnsureGuestKernel(const std::string& cache_dir);

// One file of an initramfs: a directory (data empty, mode S_IFDIR|...), a regular file, or
// a character device (rdev set).
struct CpioEntry {
  std::string name;  // relative, no leading '/'
  unsigned mode = 0;
  std::string data;
  unsigned rdev_major = 0, rdev_minor = 0;
};
// The entries as a "newc" cpio archive (what the kernel unpacks as an initramfs).
std::string CpioArchive(const std::vector<CpioEntry>& entries);

// The initramfs for `spaced` (a static binary) and `kernel`; built unless cached.
Result<std::string> EnsureInitramfs(const std::string& cache_dir, const GuestKernel& kernel, const std::string& spaced);

// The ext4 image of the template tree at `tree` (digest `digest`); built unless cached.
// Sized to the tree plus `slack_bytes` of free space for the sandbox's writes. `du` and
// `mkfs.ext4 -d` read the tree through `runner` (RuntimeConfig::tree_runner; empty: here) and
// write the image through their stdin, a file this process made.
Result<std::string> EnsureTemplateDisk(const std::string& cache_dir, const std::string& digest, const std::string& tree,
                                       uint64_t slack_bytes, const TreeToolRunner& runner = {});

// Copies `from` to the new file `to`, sharing blocks where the filesystem can (FICLONE).
// On failure the partial `to` is removed.
Status CloneFile(const std::string& from, const std::string& to);
// The same into the new file `name` (one path component, never a symlink: O_EXCL|O_NOFOLLOW)
// of the directory `dir_fd`.
Status CloneFileAt(const std::string& from, int dir_fd, const std::string& name);
// The same from an open file (`what` names it in errors); the new file is 0600.
Status CloneFdAt(int src_fd, const std::string& what, int dir_fd, const std::string& name);

}  // namespace space::runtime::vm
