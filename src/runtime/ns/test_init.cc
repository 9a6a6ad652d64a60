// runtime_test_init: a stand-in for spaced used by runtime_test. Runs as PID 1 of a
// sandbox, probes its environment and writes "key=value" lines to the channel (fd 3),
// then "END". Afterwards it echoes every byte it reads on fd 3 back (a liveness probe for
// freeze/thaw tests) until EOF. Statically linked: the sandbox root has no libc.
//
// TEST_MODE=quiet skips the probes (used by the launch benchmark).
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/keyctl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

namespace {

constexpr int kChannel = 3;

void Emit(const std::string& key, const std::string& value) {
  std::string line = key + "=" + value + "\n";
  (void)!write(kChannel, line.data(), line.size());
}

std::string Errno(long rc) {
  if (rc >= 0) return "0";
  const char* name = strerrorname_np(errno);
  return name ? name : std::to_string(errno);
}

std::string ReadFile(const char* path) {
  std::string out;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  close(fd);
  return out;
}

std::string Interfaces() {
  std::string dev = ReadFile("/proc/net/dev"), out;
  size_t pos = 0;
  for (int line = 0; pos < dev.size(); ++line) {
    size_t end = dev.find('\n', pos);
    if (end == std::string::npos) end = dev.size();
    std::string l = dev.substr(pos, end - pos);
    pos = end + 1;
    size_t colon = l.find(':');
    if (line < 2 || colon == std::string::npos) continue;
    size_t start = l.find_first_not_of(' ');
    if (!out.empty()) out += ",";
    out += l.substr(start, colon - start);
  }
  return out;
}

int CountPids() {
  int n = 0;
  DIR* d = opendir("/proc");
  if (!d) return -1;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] >= '0' && e->d_name[0] <= '9') ++n;
  }
  closedir(d);
  return n;
}

std::string OpenFds() {
  std::string out;
  DIR* d = opendir("/proc/self/fd");
  if (!d) return "?";
  int self = dirfd(d);
  int fds[64], n = 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    int fd = atoi(e->d_name);
    if (fd != self && n < 64) fds[n++] = fd;
  }
  closedir(d);
  for (int i = 0; i < n; ++i)
    for (int j = i + 1; j < n; ++j)
      if (fds[j] < fds[i]) std::swap(fds[i], fds[j]);
  for (int i = 0; i < n; ++i) out += (i ? "," : "") + std::to_string(fds[i]);
  return out;
}

// Runs argv in a child and returns its stdout.
std::string Run(const char* const argv[]) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return "pipe failed";
  pid_t pid = fork();
  if (pid == 0) {
    dup2(p[1], 1);
    execv(argv[0], const_cast<char* const*>(argv));
    _exit(127);
  }
  close(p[1]);
  std::string out;
  char buf[256];
  ssize_t n;
  while ((n = read(p[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  close(p[0]);
  int status;
  waitpid(pid, &status, 0);
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

bool CgroupsAreRoots() {
  std::string cg = ReadFile("/proc/self/cgroup");
  size_t pos = 0;
  while (pos < cg.size()) {
    size_t end = cg.find('\n', pos);
    if (end == std::string::npos) end = cg.size();
    std::string l = cg.substr(pos, end - pos);
    pos = end + 1;
    if (l.substr(l.rfind(':') + 1) != "/") return false;
  }
  return !cg.empty();
}

void Probe() {
  Emit("pid", std::to_string(getpid()));
  Emit("uid", std::to_string(getuid()));
  Emit("gid", std::to_string(getgid()));
  char host[128] = {};
  gethostname(host, sizeof host - 1);
  Emit("hostname", host);
  Emit("ifaces", Interfaces());
  Emit("proc_pids", std::to_string(CountPids()));
  struct stat st;
  for (const char* f : {"kcore", "keys", "timer_list", "sched_debug", "sysrq-trigger"}) {
    std::string path = std::string("/proc/") + f, v = "absent";
    if (stat(path.c_str(), &st) == 0) {
      v = S_ISCHR(st.st_mode)
              ? std::to_string(major(st.st_rdev)) + ":" + std::to_string(minor(st.st_rdev))
              : "unmasked";
    }
    Emit(std::string("mask_") + f, v);
  }
  struct statvfs vfs;
  Emit("sys_ro", statvfs("/sys", &vfs) == 0 && (vfs.f_flag & ST_RDONLY) ? "1" : "0");
  Emit("proc_sys_ro", statvfs("/proc/sys", &vfs) == 0 && (vfs.f_flag & ST_RDONLY) ? "1" : "0");
  struct statfs fs;
  Emit("acpi_fs",
       statfs("/proc/acpi", &fs) == 0 ? (fs.f_type == 0x01021994 ? "tmpfs" : "other") : "absent");
  Emit("sys_fs", statfs("/sys", &fs) == 0 && fs.f_type == 0x62656572 ? "sysfs" : "other");
  Emit("keyctl", Errno(syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0)));
  Emit("bpf", Errno(syscall(SYS_bpf, 0, nullptr, 0)));
  Emit("clone3", Errno(syscall(SYS_clone3, nullptr, 0)));
  Emit("open_tree", Errno(syscall(SYS_open_tree, AT_FDCWD, "/", 0)));
  Emit("unshare_user", Errno(unshare(CLONE_NEWUSER)));
  Emit("nnp", std::to_string(prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)));
  Emit("fds", OpenFds());
  Emit("cgroup_roots", CgroupsAreRoots() ? "1" : "0");
  Emit("busybox_uid", stat("/bin/busybox", &st) == 0 ? std::to_string(st.st_uid) : "missing");
  int fd = open("/created_by_root", O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
  Emit("create", fd >= 0 ? "0" : Errno(-1));
  if (fd >= 0) close(fd);
  fd = open("/dev/ptmx", O_RDWR | O_CLOEXEC);
  Emit("ptmx", fd >= 0 ? "0" : Errno(-1));
  if (fd >= 0) close(fd);
  fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
  Emit("dev_null", fd >= 0 && write(fd, "x", 1) == 1 ? "0" : Errno(-1));
  if (fd >= 0) close(fd);
  const char* id_argv[] = {"/bin/id", "-u", nullptr};
  Emit("sh_id", Run(id_argv));
  const char* sh_argv[] = {"/bin/sh", "-c", "echo hi > /tmp/x && cat /tmp/x", nullptr};
  Emit("sh_tmp", Run(sh_argv));
}

}  // namespace

int main() {
  const char* mode = getenv("TEST_MODE");
  if (mode == nullptr || strcmp(mode, "quiet") != 0) Probe();
  (void)!write(kChannel, "END\n", 4);
  // A second process, so Destroy has more than init to kill.
  if (fork() == 0) {
    for (;;) pause();
  }
  char c;
  for (;;) {
    ssize_t n = read(kChannel, &c, 1);
    if (n == 1) {
      (void)!write(kChannel, &c, 1);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return 0;
  }
}
