#include "node/tree_jail.h"

#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/capabilities.h"
#include "common/datagram.h"
#include "common/helper_spawn.h"
#include "common/host_slots.h"
#include "common/kill_child.h"
#include "common/seccomp_denylist.h"
#include "common/syscall.h"
#include "common/unique_fd.h"
#include "runtime/ns/mounts.h"
#include "runtime/ns/userns.h"

namespace space::node {
namespace {

constexpr DatagramLimits kChannel = {64, 2, "tree jail channel"};
constexpr size_t kMaxEntriesLimit = 1000000;

// Every capability but CAP_DAC_READ_SEARCH: the jail reads, and nothing else.
std::vector<int> AllButReadSearch() {
  std::vector<int> caps;
  for (int c = 0; c <= LastCapability(); ++c) {
    if (c != CAP_DAC_READ_SEARCH) caps.push_back(c);
  }
  return caps;
}

// The jail's side once it holds the trees: readable descriptors of both roots, then no new
// privileges, one capability left and a seccomp fence: no sockets (so no network, not even the
// host's loopback), and nothing of what no helper does (exec, ptrace, mounts, namespaces...).
// An error message, or empty.
std::string Confine(const Datagram& d, UniqueFd* a, UniqueFd* b) {
  if (d.fds.size() != 2 || d.bytes != "trees") return "receiving the trees: unexpected message";
  // The clones come as O_PATH-like descriptors; their directories must be read.
  a->reset(::openat(d.fds[0].get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  b->reset(::openat(d.fds[1].get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!a->valid() || !b->valid()) return std::string("opening a tree: ") + std::strerror(errno);
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return std::string("no_new_privs: ") + std::strerror(errno);
  if (Status st = DropCapabilities(AllButReadSearch()); !st.ok()) return st.ToString();
  DenyList fence;
  fence.syscalls = HelperRefusedSyscalls();
  fence.syscalls.insert(fence.syscalls.end(), {"socket", "socketpair", "connect", "accept", "accept4", "bind", "listen"});
  if (Status st = LoadDenyList(fence); !st.ok()) return st.ToString();
  return "";
}

Status WriteAll(int fd, const std::string& bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = RetryEintr([&] { return ::write(fd, bytes.data() + off, bytes.size() - off); });
    if (n < 0) return ErrnoStatus("write", "tree jail output", errno);
    off += static_cast<size_t>(n);
  }
  return Status::Ok();
}

// Reads `fd` to its end, at most `limit` bytes: more is an error.
Result<std::string> ReadBounded(int fd, size_t limit) {
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = RetryEintr([&] { return ::read(fd, buf, sizeof buf); });
    if (n < 0) return ErrnoStatus("read", "tree jail output", errno);
    if (n == 0) return out;
    if (out.size() + static_cast<size_t>(n) > limit) {
      return ResourceExhausted("tree jail: output exceeds " + std::to_string(limit) + " bytes");
    }
    out.append(buf, static_cast<size_t>(n));
  }
}

Result<std::vector<std::string>> PathList(const nlohmann::json& j, const char* name, size_t* budget) {
  if (!j.contains(name) || !j[name].is_array()) return Internal(std::string("tree jail: no list ") + name);
  std::vector<std::string> out;
  for (const auto& p : j[name]) {
    if (*budget == 0) return Internal("tree jail: more paths than asked for");
    --*budget;
    if (!p.is_string()) return Internal(std::string("tree jail: a non-string in ") + name);
    const std::string& s = p.get_ref<const std::string&>();
    if (s.empty() || s[0] != '/' || s.size() > PATH_MAX || s.find('\0') != std::string::npos) {
      return Internal(std::string("tree jail: a malformed path in ") + name);
    }
    out.push_back(s);
  }
  return out;
}

}  // namespace

Result<storage::TreeDiff> ParseTreeDiff(const std::string& json, size_t max_entries) {
  auto j = nlohmann::json::parse(json, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Internal("tree jail: output is not a JSON object");
  if (j.contains("error")) {
    std::string e = j["error"].is_string() ? j["error"].get<std::string>() : "unknown";
    if (e.size() > 1024) e.resize(1024);
    return Internal("tree jail: " + e);
  }
  // A diff may list one entry past the limit in each list before it notices; allow for it.
  size_t budget = max_entries + 3;
  storage::TreeDiff d;
  ASSIGN_OR_RETURN(d.added, PathList(j, "added", &budget));
  ASSIGN_OR_RETURN(d.changed, PathList(j, "changed", &budget));
  ASSIGN_OR_RETURN(d.removed, PathList(j, "removed", &budget));
  if (!j.contains("truncated") || !j["truncated"].is_boolean()) return Internal("tree jail: no truncated flag");
  d.truncated = j["truncated"].get<bool>();
  return d;
}

Result<storage::TreeDiff> DiffInTreeJail(const TreeJailConfig& config, const std::string& a_dir,
                                         const std::string& b_dir, size_t max_entries) {
  if (max_entries == 0 || max_entries > kMaxEntriesLimit) return InvalidArgument("diff: max_entries out of range");
  ASSIGN_OR_RETURN(UniqueFd a, OpenFd(a_dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  ASSIGN_OR_RETURN(UniqueFd b, OpenFd(b_dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  ASSIGN_OR_RETURN(int64_t slot, config.acquire_slot());
  struct Lease {
    const TreeJailConfig& c;
    int64_t slot;
    ~Lease() { c.release_slot(slot); }
  } lease{config, slot};
  const uint32_t uid_base = HostSlots::UidBase(slot);

  int sp[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) != 0) return ErrnoStatus("socketpair", "tree jail", errno);
  UniqueFd ctl(sp[0]), ctl_child(sp[1]);
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return ErrnoStatus("pipe2", "tree jail", errno);
  UniqueFd out_r(out[0]), out_w(out[1]);

  HelperSpec spec;
  spec.args = {"space", "tree-jail", "diff", "--ctl-fd", "3", "--out-fd", "4", "--max-entries", std::to_string(max_entries)};
  spec.fds = {{ctl_child.get(), 3}, {out_w.get(), 4}};
  spec.user.root_in_namespace = true;
  spec.user.map_ids = [uid_base](int pidfd, pid_t pid) {
    return runtime::ns::MapIds({.pidfd = pidfd, .pid = pid, .uid_base = uid_base, .shape = runtime::ns::IdMapShape::kSandbox});
  };
  ASSIGN_OR_RETURN(pid_t pid, SpawnHelper(spec));
  ctl_child.reset();
  out_w.reset();
  auto give_up = [pid](Status st) {
    (void)KillChildPid(pid);
    (void)RetryEintr([&] { return ::waitpid(pid, nullptr, 0); });
    return st;
  };
  UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));  // our child, not yet reaped
  if (!pidfd) return give_up(ErrnoStatus("pidfd_open", "tree jail", errno));
  std::vector<UniqueFd> clones;
  for (int dir : {a.get(), b.get()}) {
    Result<UniqueFd> clone = runtime::ns::IdmapTree(
        {.dir_fd = dir, .pidfd = pidfd.get(), .pid = pid, .uid_base = uid_base, .read_only = true});
    if (!clone.ok()) return give_up(clone.status().Annotate("tree jail"));
    clones.push_back(std::move(*clone));
  }
  if (Status st = SendDatagram(ctl.get(), "trees", {clones[0].get(), clones[1].get()}, kChannel); !st.ok()) {
    return give_up(st);
  }
  clones.clear();
  Result<std::string> output = ReadBounded(out_r.get(), kMaxTreeJailOutputBytes);
  if (!output.ok()) return give_up(output.status());
  int status = 0;
  if (RetryEintr([&] { return ::waitpid(pid, &status, 0); }) != pid) return ErrnoStatus("waitpid", "tree jail", errno);
  Result<storage::TreeDiff> diff = ParseTreeDiff(*output, max_entries);
  if (!diff.ok()) return diff.status();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Internal("tree jail: ended with status " + std::to_string(status) + " after a complete result");
  }
  return diff;
}

int TreeJailMain(int argc, char** argv) {
  long ctl_fd = -1, out_fd = -1, max_entries = -1;
  bool ok = argc == 9 && std::strcmp(argv[2], "diff") == 0;
  for (int i = 3; ok && i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--ctl-fd") ctl_fd = std::strtol(argv[i + 1], nullptr, 10);
    else if (flag == "--out-fd") out_fd = std::strtol(argv[i + 1], nullptr, 10);
    else if (flag == "--max-entries") max_entries = std::strtol(argv[i + 1], nullptr, 10);
    else ok = false;
  }
  if (!ok || ctl_fd < 3 || out_fd < 3 || ctl_fd == out_fd || max_entries < 1 ||
      max_entries > static_cast<long>(kMaxEntriesLimit)) {
    std::fprintf(stderr, "space tree-jail: started by the node only (diff --ctl-fd N --out-fd M --max-entries K)\n");
    return 2;
  }
  auto fail = [out_fd](const std::string& message) {
    (void)WriteAll(static_cast<int>(out_fd), nlohmann::json{{"error", message}}.dump(
                                                -1, ' ', false, nlohmann::json::error_handler_t::replace));
    return 1;
  };
  Result<Datagram> d = ReceiveDatagram(static_cast<int>(ctl_fd), kChannel);
  if (!d.ok()) return fail("receiving the trees: " + d.status().ToString());
  ::close(static_cast<int>(ctl_fd));
  UniqueFd a, b;
  if (std::string err = Confine(*d, &a, &b); !err.empty()) return fail(err);
  d->fds.clear();
  Result<storage::TreeDiff> diff = storage::DiffTreesAt(a.get(), b.get(), static_cast<size_t>(max_entries));
  if (!diff.ok()) return fail(diff.status().ToString());
  // Names come from the sandbox: not always UTF-8; replaced rather than refused.
  std::string json = nlohmann::json{{"added", diff->added},
                                    {"changed", diff->changed},
                                    {"removed", diff->removed},
                                    {"truncated", diff->truncated}}
                         .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return WriteAll(static_cast<int>(out_fd), json).ok() ? 0 : 1;
}

}  // namespace space::node
