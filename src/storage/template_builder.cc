#include "storage/template_builder.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <vector>

#include "common/clock.h"
#include "common/syscall.h"
#include "storage/debootstrap.h"
#include "storage/fs_util.h"
#include "storage/subprocess.h"

namespace space::storage {
namespace {

constexpr char kBusybox[] = "/bin/busybox";
constexpr uid_t kUserId = 1000;
constexpr char kUnsafeIoConf[] = "etc/dpkg/dpkg.cfg.d/space-build-unsafe-io";

void Report(const ProgressFn& progress, const std::string& line) {
  if (progress) progress(line);
}

// mkdirat + explicit chmod/chown so the result (and thus the digest) ignores the umask.
Status MakeDirAt(int root, const std::string& rel, mode_t mode, uid_t uid = 0, gid_t gid = 0) {
  if (::mkdirat(root, rel.c_str(), mode) != 0 && errno != EEXIST) return ErrnoStatus("mkdirat", rel, errno);
  int fd = ::openat(root, rel.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("openat", rel, errno);
  UniqueFd dir(fd);
  if (::fchown(dir.get(), uid, gid) != 0) return ErrnoStatus("fchown", rel, errno);
  if (::fchmod(dir.get(), mode) != 0) return ErrnoStatus("fchmod", rel, errno);
  return Status::Ok();
}

// Creates or appends to root/rel (O_NOFOLLOW: a tree's etc/passwd may be a planted symlink).
Status WriteAt(int root, const std::string& rel, std::string_view data, mode_t mode, bool append) {
  int flags = O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | (append ? O_APPEND : O_TRUNC);
  int fd = RetryEintr([&] { return ::openat(root, rel.c_str(), flags, mode); });
  if (fd < 0) return ErrnoStatus("openat", rel, errno);
  UniqueFd file(fd);
  if (!append && ::fchmod(file.get(), mode) != 0) return ErrnoStatus("fchmod", rel, errno);
  return WriteAll(file.get(), data);
}

Result<std::string> ReadAt(int root, const std::string& rel) {
  int fd = RetryEintr([&] { return ::openat(root, rel.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC); });
  if (fd < 0) return ErrnoStatus("openat", rel, errno);
  UniqueFd file(fd);
  std::string out;
  char buf[8192];
  for (;;) {
    ssize_t n = RetryEintr([&] { return ::read(file.get(), buf, sizeof buf); });
    if (n < 0) return ErrnoStatus("read", rel, errno);
    if (n == 0) return out;
    out.append(buf, static_cast<size_t>(n));
  }
}

// Appends `line` unless an entry for `name` ("name:") already starts a line.
Status AddAccountLine(int root, const std::string& rel, const std::string& name, const std::string& line) {
  ASSIGN_OR_RETURN(std::string text, ReadAt(root, rel));
  if (text.rfind(name + ":", 0) == 0 || text.find("\n" + name + ":") != std::string::npos) return Status::Ok();
  std::string add = (text.empty() || text.back() == '\n') ? line : "\n" + line;
  return WriteAt(root, rel, add + "\n", 0644, /*append=*/true);
}

Status CopyBusybox(int root) {
  ASSIGN_OR_RETURN(UniqueFd in, OpenFd(kBusybox, O_RDONLY));
  int fd = ::openat(root, "bin/busybox", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0755);
  if (fd < 0) return ErrnoStatus("openat", "bin/busybox", errno);
  UniqueFd out(fd);
  char buf[1 << 16];
  for (;;) {
    ssize_t n = RetryEintr([&] { return ::read(in.get(), buf, sizeof buf); });
    if (n < 0) return ErrnoStatus("read", kBusybox, errno);
    if (n == 0) break;
    RETURN_IF_ERROR(WriteAll(out.get(), buf, static_cast<size_t>(n)));
  }
  if (::fchmod(out.get(), 0755) != 0) return ErrnoStatus("fchmod", "bin/busybox", errno);
  return Status::Ok();
}

bool IsApplet(const std::string& s) {
  if (s.empty() || s == "busybox" || s == "." || s == "..") return false;
  for (char c : s) {
    if (c == '/' || c <= ' ') return false;
  }
  return true;
}

Status OpenRoot(const std::string& dir, UniqueFd* root) {
  ASSIGN_OR_RETURN(*root, OpenFd(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW));
  return Status::Ok();
}

// Conventions shared by every built-in template.
Status AddSandboxConventions(int root, const std::string& shell) {
  RETURN_IF_ERROR(MakeDirAt(root, "tmp", 01777));
  RETURN_IF_ERROR(MakeDirAt(root, "root", 0700));
  RETURN_IF_ERROR(MakeDirAt(root, "home", 0755));
  RETURN_IF_ERROR(MakeDirAt(root, "home/user", 0755, kUserId, kUserId));
  RETURN_IF_ERROR(AddAccountLine(root, "etc/passwd", "user", "user:x:1000:1000:user:/home/user:" + shell));
  RETURN_IF_ERROR(AddAccountLine(root, "etc/group", "user", "user:x:1000:"));
  RETURN_IF_ERROR(WriteAt(root, "etc/hostname", "sandbox\n", 0644, /*append=*/false));
  return Status::Ok();
}

}  // namespace

Status BuildBusyboxTree(const std::string& dir, const ProgressFn& progress) {
  UniqueFd root;
  RETURN_IF_ERROR(OpenRoot(dir, &root));
  Report(progress, "busybox: laying out directories");
  for (const char* d : {"bin", "etc", "dev", "proc", "sys", "usr", "usr/bin", "var"}) {
    RETURN_IF_ERROR(MakeDirAt(root.get(), d, 0755));
  }
  RETURN_IF_ERROR(CopyBusybox(root.get()));

  std::vector<std::string> applets;
  RETURN_IF_ERROR(RunProcess({{kBusybox, "--list"}}, [&](const std::string& line) {
    if (IsApplet(line)) applets.push_back(line);
  }));
  Report(progress, "busybox: linking " + std::to_string(applets.size()) + " applets");
  int bin = ::openat(root.get(), "bin", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (bin < 0) return ErrnoStatus("openat", "bin", errno);
  UniqueFd bin_fd(bin);
  for (const auto& a : applets) {
    if (::symlinkat("busybox", bin_fd.get(), a.c_str()) != 0 && errno != EEXIST) {
      return ErrnoStatus("symlinkat", "bin/" + a, errno);
    }
  }
  // Scripts say #!/usr/bin/env; busybox has it in bin/ only.
  if (::symlinkat("../../bin/busybox", root.get(), "usr/bin/env") != 0) return ErrnoStatus("symlinkat", "usr/bin/env", errno);

  RETURN_IF_ERROR(WriteAt(root.get(), "etc/passwd", "root:x:0:0:root:/root:/bin/sh\n", 0644, false));
  RETURN_IF_ERROR(WriteAt(root.get(), "etc/group", "root:x:0:\n", 0644, false));
  RETURN_IF_ERROR(WriteAt(root.get(), "etc/hosts", "127.0.0.1 localhost\n::1 localhost\n", 0644, false));
  RETURN_IF_ERROR(AddSandboxConventions(root.get(), "/bin/sh"));
  Report(progress, "busybox: done");
  return Status::Ok();
}

Status BuildBaseTree(const std::string& dir, const ToolRunner& runner, const ProgressFn& progress) {
  if (!runner) return Unavailable("building base needs the node's build jail (node/build_jail.h)");
  ASSIGN_OR_RETURN(std::string mirror, FindHostDebianMirror("bookworm"));
  UniqueFd root;
  RETURN_IF_ERROR(OpenRoot(dir, &root));
  // dpkg fsyncs every unpacked file; on a loop-backed pool each fsync becomes an fsync of the
  // whole image on the host fs. A failed build is discarded anyway and sealing the template
  // (a snapshot) commits everything, so per-file durability buys nothing here.
  for (const char* d : {"etc", "etc/dpkg", "etc/dpkg/dpkg.cfg.d"}) RETURN_IF_ERROR(MakeDirAt(root.get(), d, 0755));
  RETURN_IF_ERROR(WriteAt(root.get(), kUnsafeIoConf, "force-unsafe-io\n", 0644, /*append=*/false));
  int64_t start = MonoNowNs();
  Report(progress, "debootstrap bookworm from " + mirror);
  RETURN_IF_ERROR(runner(dir, [&](const std::string& target) { return DebootstrapArgv(target, mirror); }, progress));
  Report(progress, "debootstrap finished in " + std::to_string((MonoNowNs() - start) / 1000000000) + " s");
  if (::unlinkat(root.get(), kUnsafeIoConf, 0) != 0) return ErrnoStatus("unlinkat", kUnsafeIoConf, errno);

  RETURN_IF_ERROR(AddSandboxConventions(root.get(), "/bin/bash"));
  // Day count since the epoch, as passwd(5) tools write it.
  std::string days = std::to_string(WallNowMs() / 86400000);
  RETURN_IF_ERROR(AddAccountLine(root.get(), "etc/shadow", "user", "user:*:" + days + ":0:99999:7:::"));
  // debootstrap keeps every downloaded .deb (tens of MB) in apt's archive cache.
  int fd = ::openat(root.get(), "var/cache/apt/archives", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0) {
    UniqueFd archives(fd);
    ASSIGN_OR_RETURN(std::vector<std::string> names, ListDirAt(archives.get(), "var/cache/apt/archives"));
    for (const auto& n : names) {
      if (n.size() > 4 && n.compare(n.size() - 4, 4, ".deb") == 0 && ::unlinkat(archives.get(), n.c_str(), 0) != 0) {
        return ErrnoStatus("unlinkat", "var/cache/apt/archives/" + n, errno);
      }
    }
  }
  Report(progress, "base: done");
  return Status::Ok();
}

namespace {
// The vm runtime keeps a sandbox's disk image and memory state in <root>/.space-vm and hands
// them to QEMU. A template must not bring its own (a disk.img symlink to a host device, or
// a crafted memory state): refuse the tree instead of trusting what sits there.
Status RefuseVmStateDir(const std::string& dir) {
  struct stat st;
  const std::string p = dir + "/.space-vm";
  if (::lstat(p.c_str(), &st) == 0) {
    return InvalidArgument("template may not contain /.space-vm (reserved for the vm runtime)");
  }
  if (errno != ENOENT) return ErrnoStatus("lstat", p, errno);
  return Status::Ok();
}

Status CopyTree(const std::string& source, const std::string& dir, const ProgressFn& progress) {
  struct stat st;
  if (::stat(source.c_str(), &st) != 0) return ErrnoStatus("stat", source, errno);
  LineFn forward = [&](const std::string& line) { Report(progress, line); };
  if (S_ISDIR(st.st_mode)) {
    Report(progress, "copying " + source);
    // "src/." copies the contents and the top directory's own mode and owner.
    return RunProcess({{"/bin/cp", "-a", "--reflink=auto", "--", source + "/.", dir + "/"}}, forward);
  }
  if (!S_ISREG(st.st_mode)) return InvalidArgument(source + " is neither a directory nor a tarball");
  Report(progress, "extracting " + source);
  // GNU tar refuses members with ".." or absolute names and defers symlink creation, so an
  // archive cannot write outside `dir`.
  return RunProcess({{"/bin/tar", "--numeric-owner", "-xpf", source, "-C", dir}}, forward);
}
}  // namespace

Status ImportTree(const std::string& source, const std::string& dir, const ProgressFn& progress) {
  RETURN_IF_ERROR(CopyTree(source, dir, progress));
  return RefuseVmStateDir(dir);
}

}  // namespace space::storage
