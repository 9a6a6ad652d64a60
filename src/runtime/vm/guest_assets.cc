#include "runtime/vm/guest_assets.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>

#include "common/random.h"
#include "common/subprocess.h"
#include "common/syscall.h"

namespace space::runtime::vm {
namespace {

// Resolves the versioned image package behind linux-image-cloud-amd64, downloads it from the
// host's configured apt sources, and keeps vmlinuz plus the modules we load (decompressed:
// the guest loads them with a plain finit_module).
constexpr char kFetchKernelScript[] = R"SH(
set -eu
dest="$1"; shift
tmp="$dest.tmp.$$"
rm -rf "$tmp"; mkdir -p -m 0700 "$tmp"; cd "$tmp"
pkg=$(apt-cache depends linux-image-cloud-amd64 | sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*-cloud-amd64\)$/\1/p' | head -n 1)
[ -n "$pkg" ] || { echo "cannot resolve linux-image-cloud-amd64 (apt-get update?)"; exit 1; }
# As root into our 0700 dir: apt's default _apt sandbox user would need it world-writable,
# and root then unpacking files another user could swap is the hole.
apt-get -o APT::Sandbox::User=root download -q "$pkg"
dpkg-deb -x ./*.deb x
ver=${pkg#linux-image-}
mkdir -p out/modules
cp "x/boot/vmlinuz-$ver" out/vmlinuz
i=1
for m in "$@"; do
  f=$(find "x/lib/modules/$ver" -name "$m.ko*" | head -n 1)
  [ -n "$f" ] || { echo "module $m missing from $pkg"; exit 1; }
  case "$f" in
    *.xz) xz -dc "$f" > "out/modules/$i-$m.ko" ;;
    *.zst) zstd -dqc "$f" > "out/modules/$i-$m.ko" ;;
    *) cp "$f" "out/modules/$i-$m.ko" ;;
  esac
  i=$((i+1))
done
echo "$ver" > out/version
chmod -R a+rX out
mv out "$dest"
cd /; rm -rf "$tmp"
)SH";

std::string Hex8(uint64_t v) {
  char b[9];
  std::snprintf(b, sizeof b, "%08llx", static_cast<unsigned long long>(v & 0xffffffffu));
  return b;
}

uint64_t Fnv1a(std::string_view s, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

bool Exists(const std::string& p) { return ::access(p.c_str(), F_OK) == 0; }

// Writes `data` to `path` through a temp file and rename, world-readable.
Status PublishFile(const std::string& path, std::string_view data) { return WriteFileAtomic(path, data, 0644); }

Status Run(std::vector<std::string> argv) {
  SubprocessSpec spec;
  spec.argv = std::move(argv);
  return RunProcess(spec, [](const std::string&) {});
}

}  // namespace

Result<GuestKernel> EnsureGuestKernel(const std::string& cache_dir) {
  RETURN_IF_ERROR(MakeDirs(cache_dir, 0755));
  GuestKernel k;
  // The directory names the module set: a runtime that loads another set fetches afresh.
  std::string modules;
  for (const char* m : kGuestModules) modules += std::string(m) + ",";
  k.dir = cache_dir + "/kernel-" + Hex8(Fnv1a(modules));
  if (!Exists(k.dir + "/version")) {
    std::vector<std::string> argv = {"/bin/sh", "-c", kFetchKernelScript, "fetch-kernel", k.dir};
    for (const char* m : kGuestModules) argv.emplace_back(m);
    RETURN_IF_ERROR(Run(std::move(argv)).Annotate("fetch the guest kernel"));
  }
  ASSIGN_OR_RETURN(std::string version, ReadFileToString(k.dir + "/version", 256));
  k.version = version.substr(0, version.find('\n'));
  k.vmlinuz = k.dir + "/vmlinuz";
  int i = 1;
  for (const char* m : kGuestModules) k.modules.push_back(k.dir + "/modules/" + std::to_string(i++) + "-" + m + ".ko");
  for (const auto& f : k.modules) {
    if (!Exists(f)) return NotFound("guest kernel cache " + k.dir + " lacks " + f);
  }
  return k;
}

std::string CpioArchive(const std::vector<CpioEntry>& entries) {
  std::string out;
  auto pad4 = [&] { out.append((4 - out.size() % 4) % 4, '\0'); };
  unsigned ino = 1;
  auto put = [&](const std::string& name, unsigned mode, const std::string& data, unsigned rmaj, unsigned rmin) {
    out += "070701";
    for (uint64_t v : {uint64_t{ino++}, uint64_t{mode}, uint64_t{0}, uint64_t{0}, uint64_t{1}, uint64_t{0},
                       uint64_t{data.size()}, uint64_t{0}, uint64_t{0}, uint64_t{rmaj}, uint64_t{rmin},
                       uint64_t{name.size() + 1}, uint64_t{0}}) {
      out += Hex8(v);
    }
    out += name;
    out += '\0';
    pad4();
    out += data;
    pad4();
  };
  for (const auto& e : entries) put(e.name, e.mode, e.data, e.rdev_major, e.rdev_minor);
  put("TRAILER!!!", 0, "", 0, 0);
  return out;
}

Result<std::string> EnsureInitramfs(const std::string& cache_dir, const GuestKernel& kernel,
                                    const std::string& spaced) {
  ASSIGN_OR_RETURN(std::string init, ReadFileToString(spaced, 256u << 20));
  const std::string path = cache_dir + "/initrd-" + Hex8(Fnv1a(init, Fnv1a(kernel.dir + kernel.version))) +
                           Hex8(Fnv1a(init) >> 32) + ".cpio";
  if (Exists(path)) return path;
  std::vector<CpioEntry> e;
  for (const char* d : {"dev", "proc", "sys", "newroot", "modules"}) e.push_back({d, S_IFDIR | 0755, "", 0, 0});
  // The kernel opens /dev/console for init before devtmpfs exists: spaced's log goes to the
  // serial console (the VM's console.log on the host).
  e.push_back({"dev/console", S_IFCHR | 0600, "", 5, 1});
  e.push_back({"init", S_IFREG | 0755, std::move(init), 0, 0});
  for (const auto& m : kernel.modules) {
    ASSIGN_OR_RETURN(std::string ko, ReadFileToString(m, 64u << 20));
    e.push_back({"modules/" + m.substr(m.rfind('/') + 1), S_IFREG | 0644, std::move(ko), 0, 0});
  }
  RETURN_IF_ERROR(PublishFile(path, CpioArchive(e)));
  return path;
}

// `bash -c kDiskScript disk TREE SLACK`, stdin the image file: sizes the image to what the
// tree takes (du) plus a quarter and the slack, rounded up to MiB, and makes it.
constexpr char kDiskScript[] =
    "set -eu -o pipefail; kb=$(/usr/bin/du -sk -x \"$1\" | /usr/bin/cut -f1); "
    "mb=$(( (kb * 1024 + kb * 1024 / 4 + $2) / 1048576 + 1 )); "
    "exec /usr/sbin/mkfs.ext4 -q -F -L space-root -d \"$1\" /dev/stdin \"${mb}M\"";

Result<std::string> EnsureTemplateDisk(const std::string& cache_dir, const std::string& digest,
                                       const std::string& tree, uint64_t slack_bytes, const TreeToolRunner& runner) {
  std::string key;
  for (char c : digest) key += (isalnum(static_cast<unsigned char>(c)) ? c : '-');
  if (key.empty()) return InvalidArgument("template digest is empty");
  const std::string dir = cache_dir + "/disks";
  RETURN_IF_ERROR(MakeDirs(dir, 0700));
  const std::string path = dir + "/" + key + ".img";
  if (Exists(path)) return path;
  const std::string tmp = path + ".tmp-" + RandomHex(8);
  // Made here, so it is this process's; writable by whoever runs mkfs (root of the jail's
  // namespace, which reopens it as /dev/stdin) while only this process can reach it: the
  // directory above is 0700.
  ASSIGN_OR_RETURN(UniqueFd image, OpenFd(tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  Status st = ::fchmod(image.get(), 0666) == 0 ? Status::Ok() : ErrnoStatus("fchmod", tmp, errno);
  const TreeToolArgv argv = [slack_bytes](const std::string& target) {
    return std::vector<std::string>{"/bin/bash", "-c", kDiskScript, "disk", target, std::to_string(slack_bytes)};
  };
  if (st.ok() && runner) {
    st = runner(tree, argv, image.get());
  } else if (st.ok()) {
    SubprocessSpec spec = {.argv = argv(tree), .stdin_fd = image.get()};
    st = RunProcess(spec, [](const std::string&) {});
  }
  if (st.ok() && ::fchmod(image.get(), 0600) != 0) st = ErrnoStatus("fchmod", tmp, errno);
  if (st.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) st = ErrnoStatus("rename", path, errno);
  if (!st.ok()) {
    ::unlink(tmp.c_str());
    return st.Annotate("template disk image for " + digest);
  }
  return path;
}

namespace {
Status CopyInto(const std::string& from, int src, int dst, const std::string& to) {
  if (::ioctl(dst, FICLONE, src) == 0) return Status::Ok();
  // No shared blocks here (not btrfs/xfs, or another filesystem): a full copy, in the
  // kernel where it can (copy_file_range refuses some cross-filesystem pairs: EXDEV).
  for (;;) {
    ssize_t n = ::copy_file_range(src, nullptr, dst, nullptr, 1 << 30, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP)) break;
    if (n < 0) return ErrnoStatus("copy_file_range", to, errno);
    if (n == 0) return Status::Ok();
  }
  std::string buf(1 << 20, '\0');
  for (;;) {
    ssize_t n = RetryEintr([&] { return ::read(src, buf.data(), buf.size()); });
    if (n < 0) return ErrnoStatus("read", from, errno);
    if (n == 0) return Status::Ok();
    RETURN_IF_ERROR(WriteAll(dst, buf.data(), static_cast<size_t>(n)));
  }
}
}  // namespace

Status CloneFile(const std::string& from, const std::string& to) {
  ASSIGN_OR_RETURN(UniqueFd src, OpenFd(from, O_RDONLY | O_CLOEXEC));
  ASSIGN_OR_RETURN(UniqueFd dst, OpenFd(to, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  Status st = CopyInto(from, src.get(), dst.get(), to);
  // A half-copied image must not pass for a whole one later.
  if (!st.ok()) ::unlink(to.c_str());
  return st;
}

Status CloneFileAt(const std::string& from, int dir_fd, const std::string& name) {
  ASSIGN_OR_RETURN(UniqueFd src, OpenFd(from, O_RDONLY | O_CLOEXEC));
  // Readable by all: the tree jail exports a vm root's state from under another uid (its
  // slot's root, to which the node's uid is unmapped); the pool's 0700 directories keep the
  // host's users out.
  UniqueFd dst(::openat(dir_fd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (!dst) return ErrnoStatus("openat", name, errno);
  Status st = CopyInto(from, src.get(), dst.get(), name);
  if (!st.ok()) ::unlinkat(dir_fd, name.c_str(), 0);
  return st;
}

Status CloneFdAt(int src_fd, const std::string& what, int dir_fd, const std::string& name) {
  UniqueFd dst(::openat(dir_fd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!dst) return ErrnoStatus("openat", name, errno);
  Status st = CopyInto(what, src_fd, dst.get(), name);
  if (!st.ok()) ::unlinkat(dir_fd, name.c_str(), 0);
  return st;
}

}  // namespace space::runtime::vm
