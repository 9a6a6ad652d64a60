#include "storage/template_builder.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <vector>

#include "common/clock.h"
#include "common/subprocess.h"
#include "common/syscall.h"
#include "storage/debootstrap.h"
#include "storage/fs_util.h"

namespace space::storage {
namespace {

constexpr char kBusybox[] = "/bin/busybox";
constexpr char kTar[] = "/bin/tar";
constexpr char kBash[] = "/bin/bash";
// `bash -c kPipeScript pipe N A1..AN B1..`: runs A1..AN | B1.., failing if either fails.
constexpr char kPipeScript[] = "set -o pipefail; n=$1; shift; \"${@:1:n}\" | \"${@:n+1}\"";
constexpr uid_t kUserId = 1000;
constexpr char kUnsafeIoConf[] = "etc/dpkg/dpkg.cfg.d/space-build-unsafe-io";
constexpr size_t kMaxAccountFileBytes = 16u << 20;

void Report(const ProgressFn& progress, const std::string& line) {
  if (progress) progress(line);
}

// `rel` opened beneath `root`, never through a symlink: a debootstrapped tree's etc may be a
// link to anywhere. -1 with errno on failure.
int OpenBeneathRaw(int root, const std::string& rel, uint64_t flags, mode_t mode = 0) {
  struct open_how how = {};
  how.flags = flags | O_CLOEXEC | O_NOFOLLOW;
  how.mode = (flags & O_CREAT) ? mode : 0;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  return static_cast<int>(RetryEintr([&] { return ::syscall(SYS_openat2, root, rel.c_str(), &how, sizeof how); }));
}

Result<UniqueFd> OpenBeneath(int root, const std::string& rel, uint64_t flags, mode_t mode = 0) {
  int fd = OpenBeneathRaw(root, rel, flags, mode);
  if (fd < 0) return ErrnoStatus("openat2", rel, errno);
  return UniqueFd(fd);
}

// The directory holding rel's last component (opened beneath `root`), and that component.
Result<UniqueFd> OpenParent(int root, const std::string& rel, std::string* leaf) {
  const size_t slash = rel.rfind('/');
  *leaf = slash == std::string::npos ? rel : rel.substr(slash + 1);
  return OpenBeneath(root, slash == std::string::npos ? "." : rel.substr(0, slash), O_PATH | O_DIRECTORY);
}

// mkdirat + explicit chmod/chown so the result (and thus the digest) ignores the umask.
Status MakeDirAt(int root, const std::string& rel, mode_t mode, uid_t uid = 0, gid_t gid = 0) {
  std::string leaf;
  ASSIGN_OR_RETURN(UniqueFd parent, OpenParent(root, rel, &leaf));
  if (::mkdirat(parent.get(), leaf.c_str(), mode) != 0 && errno != EEXIST) return ErrnoStatus("mkdirat", rel, errno);
  ASSIGN_OR_RETURN(UniqueFd dir, OpenBeneath(root, rel, O_RDONLY | O_DIRECTORY));
  if (::fchown(dir.get(), uid, gid) != 0) return ErrnoStatus("fchown", rel, errno);
  if (::fchmod(dir.get(), mode) != 0) return ErrnoStatus("fchmod", rel, errno);
  return Status::Ok();
}

// A regular file only: O_NONBLOCK so that a planted FIFO neither blocks the open nor is used.
Result<UniqueFd> OpenRegular(int root, const std::string& rel, uint64_t flags, mode_t mode = 0) {
  ASSIGN_OR_RETURN(UniqueFd fd, OpenBeneath(root, rel, flags | O_NONBLOCK, mode));
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return ErrnoStatus("fstat", rel, errno);
  if (!S_ISREG(st.st_mode)) return InvalidArgument(rel + " is not a regular file");
  return fd;
}

// Creates or appends to root/rel.
Status WriteAt(int root, const std::string& rel, std::string_view data, mode_t mode, bool append) {
  ASSIGN_OR_RETURN(UniqueFd file, OpenRegular(root, rel, O_WRONLY | O_CREAT | (append ? O_APPEND : O_TRUNC), mode));
  if (!append && ::fchmod(file.get(), mode) != 0) return ErrnoStatus("fchmod", rel, errno);
  return WriteAll(file.get(), data);
}

Result<std::string> ReadAt(int root, const std::string& rel) {
  ASSIGN_OR_RETURN(UniqueFd file, OpenRegular(root, rel, O_RDONLY));
  std::string out;
  char buf[8192];
  for (;;) {
    ssize_t n = RetryEintr([&] { return ::read(file.get(), buf, sizeof buf); });
    if (n < 0) return ErrnoStatus("read", rel, errno);
    if (n == 0) return out;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > kMaxAccountFileBytes) return InvalidArgument(rel + " is larger than 16 MiB");
  }
}

Status UnlinkAt(int root, const std::string& rel) {
  std::string leaf;
  ASSIGN_OR_RETURN(UniqueFd parent, OpenParent(root, rel, &leaf));
  if (::unlinkat(parent.get(), leaf.c_str(), 0) != 0) return ErrnoStatus("unlinkat", rel, errno);
  return Status::Ok();
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
  ASSIGN_OR_RETURN(UniqueFd out, OpenBeneath(root, "bin/busybox", O_WRONLY | O_CREAT | O_EXCL, 0755));
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

// "@busybox": the whole busybox tree.
Status LayBusyboxTree(int root, const ProgressFn& progress) {
  Report(progress, "busybox: laying out directories");
  for (const char* d : {"bin", "etc", "dev", "proc", "sys", "usr", "usr/bin", "var"}) {
    RETURN_IF_ERROR(MakeDirAt(root, d, 0755));
  }
  RETURN_IF_ERROR(CopyBusybox(root));

  std::vector<std::string> applets;
  RETURN_IF_ERROR(RunProcess({{kBusybox, "--list"}}, [&](const std::string& line) {
    if (IsApplet(line)) applets.push_back(line);
  }));
  Report(progress, "busybox: linking " + std::to_string(applets.size()) + " applets");
  ASSIGN_OR_RETURN(UniqueFd bin, OpenBeneath(root, "bin", O_RDONLY | O_DIRECTORY));
  for (const auto& a : applets) {
    if (::symlinkat("busybox", bin.get(), a.c_str()) != 0 && errno != EEXIST) {
      return ErrnoStatus("symlinkat", "bin/" + a, errno);
    }
  }
  // Scripts say #!/usr/bin/env; busybox has it in bin/ only.
  ASSIGN_OR_RETURN(UniqueFd usr_bin, OpenBeneath(root, "usr/bin", O_PATH | O_DIRECTORY));
  if (::symlinkat("../../bin/busybox", usr_bin.get(), "env") != 0) return ErrnoStatus("symlinkat", "usr/bin/env", errno);

  RETURN_IF_ERROR(WriteAt(root, "etc/passwd", "root:x:0:0:root:/root:/bin/sh\n", 0644, false));
  RETURN_IF_ERROR(WriteAt(root, "etc/group", "root:x:0:\n", 0644, false));
  RETURN_IF_ERROR(WriteAt(root, "etc/hosts", "127.0.0.1 localhost\n::1 localhost\n", 0644, false));
  RETURN_IF_ERROR(AddSandboxConventions(root, "/bin/sh"));
  Report(progress, "busybox: done");
  return Status::Ok();
}

// "@base-prepare": dpkg fsyncs every unpacked file; on a loop-backed pool each fsync becomes
// an fsync of the whole image on the host fs. A failed build is discarded anyway and sealing
// the template (a snapshot) commits everything, so per-file durability buys nothing here.
Status PrepareBase(int root) {
  for (const char* d : {"etc", "etc/dpkg", "etc/dpkg/dpkg.cfg.d"}) RETURN_IF_ERROR(MakeDirAt(root, d, 0755));
  return WriteAt(root, kUnsafeIoConf, "force-unsafe-io\n", 0644, /*append=*/false);
}

// "@base-finish": after debootstrap (whose tree came from a package mirror's code).
Status FinishBase(int root, const ProgressFn& progress) {
  RETURN_IF_ERROR(UnlinkAt(root, kUnsafeIoConf));
  RETURN_IF_ERROR(AddSandboxConventions(root, "/bin/bash"));
  // Day count since the epoch, as passwd(5) tools write it.
  std::string days = std::to_string(WallNowMs() / 86400000);
  RETURN_IF_ERROR(AddAccountLine(root, "etc/shadow", "user", "user:*:" + days + ":0:99999:7:::"));
  // debootstrap keeps every downloaded .deb (tens of MB) in apt's archive cache.
  int fd = OpenBeneathRaw(root, "var/cache/apt/archives", O_RDONLY | O_DIRECTORY);
  if (fd < 0 && errno != ENOENT) return ErrnoStatus("openat2", "var/cache/apt/archives", errno);
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

ToolArgv Step(const std::string& name) {
  return [name](const std::string& target) { return std::vector<std::string>{name, target}; };
}

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

// tar's flag for the compression whose magic starts the tarball at `fd`; "" for none (tar
// cannot detect it on a stream, only on a file it opens itself).
Result<std::string> CompressionFlag(int fd, const std::string& source) {
  unsigned char m[6] = {};
  ssize_t n = RetryEintr([&] { return ::pread(fd, m, sizeof m, 0); });
  if (n < 0) return ErrnoStatus("read", source, errno);
  auto starts = [&](std::initializer_list<unsigned char> magic) {
    if (static_cast<size_t>(n) < magic.size()) return false;
    size_t i = 0;
    for (unsigned char c : magic) {
      if (m[i++] != c) return false;
    }
    return true;
  };
  if (starts({0x1f, 0x8b})) return std::string("--gzip");
  if (starts({'B', 'Z', 'h'})) return std::string("--bzip2");
  if (starts({0xfd, '7', 'z', 'X', 'Z', 0x00})) return std::string("--xz");
  if (starts({0x28, 0xb5, 0x2f, 0xfd})) return std::string("--zstd");
  if (starts({'L', 'Z', 'I', 'P'})) return std::string("--lzip");
  if (starts({0x5d, 0x00, 0x00})) return std::string("--lzma");
  if (starts({0x1f, 0x9d})) return std::string("--uncompress");
  return std::string();
}

// What both ends of an import keep of each file: numeric owners, modes and the xattrs a
// sandbox's programs use (file capabilities; user.*). Others (trusted.*, security.selinux)
// belong to the host, not to a template.
const std::vector<std::string> kTarCommon = {"--numeric-owner", "--xattrs", "--xattrs-include=user.*",
                                             "--xattrs-include=security.capability"};

std::vector<std::string> ExtractArgv(const std::string& target, const std::string& compression) {
  std::vector<std::string> argv = {kTar, "--extract", "--preserve-permissions", "--same-owner"};
  argv.insert(argv.end(), kTarCommon.begin(), kTarCommon.end());
  if (!compression.empty()) argv.push_back(compression);
  // GNU tar refuses members with ".." or absolute names and defers symlink creation, so an
  // archive cannot write outside `target`.
  argv.insert(argv.end(), {"--file=-", "--directory=" + target, "--anchored", "--exclude=dev/*", "--exclude=./dev/*"});
  return argv;
}

}  // namespace

Status BuildBusyboxTree(const std::string& dir, const ToolRunner& runner, const ProgressFn& progress) {
  return runner(dir, {.argv = Step("@busybox")}, progress);
}

Status BuildBaseTree(const std::string& dir, const ToolRunner& runner, const ProgressFn& progress) {
  if (!runner) return Unavailable("building base needs the node's build jail (node/build_jail.h)");
  ASSIGN_OR_RETURN(std::string mirror, FindHostDebianMirror("bookworm"));
  RETURN_IF_ERROR(runner(dir, {.argv = Step("@base-prepare")}, progress));
  int64_t start = MonoNowNs();
  Report(progress, "debootstrap bookworm from " + mirror);
  ToolRun debootstrap = {.argv = [&](const std::string& target) { return DebootstrapArgv(target, mirror); },
                         .network = true,
                         .bind_devices = true};
  RETURN_IF_ERROR(runner(dir, debootstrap, progress));
  Report(progress, "debootstrap finished in " + std::to_string((MonoNowNs() - start) / 1000000000) + " s");
  return runner(dir, {.argv = Step("@base-finish")}, progress);
}

std::vector<std::string> SplitImportRoots(const std::string& roots) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= roots.size()) {
    size_t end = roots.find(':', start);
    if (end == std::string::npos) end = roots.size();
    std::string root = roots.substr(start, end - start);
    while (root.size() > 1 && root.back() == '/') root.pop_back();
    if (!root.empty()) out.push_back(std::move(root));
    start = end + 1;
  }
  return out;
}

std::string ImportRootOf(const std::string& roots, const std::string& source) {
  std::string best;
  if (source.empty() || source[0] != '/') return best;
  for (const auto& root : SplitImportRoots(roots)) {
    if (root[0] != '/') continue;
    const bool below = root == "/" || source == root || source.compare(0, root.size() + 1, root + "/") == 0;
    if (below && root.size() > best.size()) best = root;
  }
  return best;
}

Result<UniqueFd> OpenImportSource(const std::string& import_roots, const std::string& source) {
  if (source.empty() || source[0] != '/') return InvalidArgument("import source must be an absolute path");
  const std::string root = ImportRootOf(import_roots, source);
  if (root.empty()) {
    std::string named;
    for (const auto& r : SplitImportRoots(import_roots)) named += (named.empty() ? "" : ", ") + r;
    return PermissionDenied("template imports read only below the trusted template sources (" + named +
                            "; --trusted-template-source, --import-root); " + source + " is below none of them");
  }
  std::string rel;
  if (root == "/") {
    rel = source.substr(1);
  } else if (source == root) {
    rel = ".";
  } else {
    rel = source.substr(root.size() + 1);
  }
  if (rel.empty()) rel = ".";
  ASSIGN_OR_RETURN(UniqueFd root_fd, OpenFd(root, O_PATH | O_DIRECTORY));
  struct open_how how = {};
  how.flags = O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  long fd = RetryEintr([&] { return ::syscall(SYS_openat2, root_fd.get(), rel.c_str(), &how, sizeof how); });
  if (fd < 0) return ErrnoStatus("open", source, errno);
  return UniqueFd(static_cast<int>(fd));
}

Status ImportTree(int source_fd, const std::string& source, const std::string& dir, const ToolRunner& runner,
                  const ProgressFn& progress) {
  struct stat st;
  if (::fstat(source_fd, &st) != 0) return ErrnoStatus("fstat", source, errno);
  if (S_ISREG(st.st_mode)) {
    ASSIGN_OR_RETURN(std::string compression, CompressionFlag(source_fd, source));
    Report(progress, "extracting " + source);
    ToolRun extract = {.argv = [&](const std::string& t) { return ExtractArgv(t, compression); },
                       .stdin_fd = source_fd};
    RETURN_IF_ERROR(runner(dir, extract, progress));
    return RefuseVmStateDir(dir);
  }
  if (!S_ISDIR(st.st_mode)) return InvalidArgument(source + " is neither a directory nor a tarball");

  // A directory: both tars run in one step, `tar -c` in the source (the step's working
  // directory: the runner shows it to the step as it shows the tree, so an admin's directory
  // with private files of any owner is read there, never with a host privilege) piped into
  // `tar -x`. bash's pipefail: either one failing fails the step.
  Report(progress, "copying " + source);
  std::vector<std::string> create = {kTar, "--create", "--sparse"};
  create.insert(create.end(), kTarCommon.begin(), kTarCommon.end());
  create.insert(create.end(), {"--file=-", "."});
  ToolRun copy = {.argv =
                      [&](const std::string& target) {
                        std::vector<std::string> argv = {kBash, "-c", kPipeScript, "pipe",
                                                         std::to_string(create.size())};
                        argv.insert(argv.end(), create.begin(), create.end());
                        for (std::string& a : ExtractArgv(target, "")) argv.push_back(std::move(a));
                        return argv;
                      },
                  .source_dir_fd = source_fd};
  RETURN_IF_ERROR(runner(dir, copy, progress));
  return RefuseVmStateDir(dir);
}

Status RunTreeStep(const std::vector<std::string>& argv, const ProgressFn& progress) {
  if (argv.size() != 2 || argv[1].empty() || argv[1][0] != '/') return InvalidArgument("tree step: want @NAME TARGET");
  UniqueFd root;
  RETURN_IF_ERROR(OpenRoot(argv[1], &root));
  if (argv[0] == "@busybox") return LayBusyboxTree(root.get(), progress);
  if (argv[0] == "@base-prepare") return PrepareBase(root.get());
  if (argv[0] == "@base-finish") return FinishBase(root.get(), progress);
  return InvalidArgument("no tree step named " + argv[0]);
}

Status RunToolHere(const std::string& tree_dir, const ToolRun& run, const ProgressFn& on_line) {
  std::vector<std::string> argv = run.argv(tree_dir);
  if (!argv.empty() && !argv[0].empty() && argv[0][0] == '@') return RunTreeStep(argv, on_line);
  SubprocessSpec spec = {.argv = std::move(argv), .stdin_fd = run.stdin_fd, .cwd_fd = run.source_dir_fd};
  return RunProcess(spec, on_line);
}

}  // namespace space::storage
