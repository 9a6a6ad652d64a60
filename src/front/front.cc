#include "front/front.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <iostream>
#include <string>

#include "common/datagram.h"
#include "common/host_slots.h"
#include "common/log.h"
#include "common/seccomp_denylist.h"
#include "common/syscall.h"
#include "common/unique_fd.h"
#include "front/forwarder.h"
#include "http/http_server.h"

namespace space::front {
namespace {

Status LoadFrontSeccomp() {
  DenyList list;
  list.syscalls = HelperRefusedSyscalls();
  // New sockets (of any family), outgoing connections and new listeners: the front accepts on
  // the socket it was given and reaches the node only through socketpair and its channel.
  for (const char* s : {"socket", "connect", "bind", "listen", "setuid", "setgid", "setreuid", "setregid",
                        "setresuid", "setresgid", "setgroups", "setfsuid", "setfsgid", "capset"}) {
    list.syscalls.push_back(s);
  }
  return LoadDenyList(list);  // no new namespaces, signals only to itself
}

Status CheckNoCapabilities() {
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (::syscall(SYS_capget, &hdr, data) != 0) return ErrnoStatus("capget", "front", errno);
  for (const auto& d : data) {
    if (d.effective || d.permitted || d.inheritable) return Internal("front: capabilities remain after dropping root");
  }
  for (int cap = 0; cap <= CAP_LAST_CAP; ++cap) {
    if (::prctl(PR_CAPBSET_READ, cap, 0, 0, 0) == 1) return Internal("front: bounding set not empty");
  }
  return Status::Ok();
}

}  // namespace

Status MakeFrontRoot(const std::string& empty_dir) {
  RETURN_IF_ERROR(MakeDirs(empty_dir.substr(0, empty_dir.rfind('/')), 0755));
  if (::mkdir(empty_dir.c_str(), 0555) != 0 && errno != EEXIST) return ErrnoStatus("mkdir", empty_dir, errno);
  return Status::Ok();
}

Status DropToFront(const std::string& empty_dir) {
  // The empty root: made by root, writable by nobody, so the front can neither read host files
  // nor plant any there.
  const bool root = ::geteuid() == 0;
  if (root) RETURN_IF_ERROR(MakeFrontRoot(empty_dir));
  // Checked and entered through one descriptor, so what is checked is what becomes the root
  // (a swap of the path in between, were its parent writable, changes nothing).
  UniqueFd dir(::open(empty_dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir.valid()) return ErrnoStatus("open", empty_dir, errno);
  struct stat st;
  if (::fstat(dir.get(), &st) != 0) return ErrnoStatus("stat", empty_dir, errno);
  // Started as root: the directory must be root's. Started in a user namespace of its own
  // (HelperUser), root is unmapped and shows as the overflow id: then it must not be ours,
  // so this uid cannot make it writable either.
  const bool owner_ok = root ? st.st_uid == 0 : st.st_uid != ::getuid();
  if (!owner_ok || (st.st_mode & 0222) != 0) {
    return PermissionDenied(empty_dir + " must be a directory owned by root that nobody can write");
  }
  if (!root) {
    // chroot needs CAP_SYS_CHROOT, which this process holds in no namespace after its exec: a
    // user namespace nested in its own gives it that (there only) until the sets are emptied
    // below. Our uid is mapped in the parent, so no privilege is needed to make one.
    if (::unshare(CLONE_NEWUSER) != 0) return ErrnoStatus("unshare", "CLONE_NEWUSER (front)", errno);
  }
  if (::fchdir(dir.get()) != 0) return ErrnoStatus("fchdir", empty_dir, errno);
  if (::chroot(".") != 0) return ErrnoStatus("chroot", empty_dir, errno);
  if (::chdir("/") != 0) return ErrnoStatus("chdir", "/", errno);
  // The bounding set first (needs CAP_SETPCAP), then the ids: changing every uid away from 0
  // clears the permitted, effective and ambient sets.
  for (int cap = 0; cap <= CAP_LAST_CAP; ++cap) {
    if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) return ErrnoStatus("capbset_drop", "front", errno);
  }
  ::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  if (root) {
    if (::setgroups(0, nullptr) != 0) return ErrnoStatus("setgroups", "front", errno);
    if (::setresgid(kFrontGid, kFrontGid, kFrontGid) != 0) return ErrnoStatus("setresgid", "front", errno);
    if (::setresuid(kFrontUid, kFrontUid, kFrontUid) != 0) return ErrnoStatus("setresuid", "front", errno);
  } else {
    // No id to change to (none is mapped here): the capabilities of the nested namespace go
    // explicitly. The ids and groups were set before exec (HelperUser).
    __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct none[2] = {};
    if (::syscall(SYS_capset, &hdr, none) != 0) return ErrnoStatus("capset", "front", errno);
  }
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return ErrnoStatus("no_new_privs", "front", errno);
  if (::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) return ErrnoStatus("dumpable", "front", errno);
  RETURN_IF_ERROR(CheckNoCapabilities());
  if (::setresuid(0, 0, 0) == 0) return Internal("front: could regain uid 0");
  return LoadFrontSeccomp();
}

int RunFront(int channel_fd, int listen_fd, pid_t node_pid) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != node_pid) return 1;  // the node died before we got here
  // Ctrl-C reaches the whole process group; the front ends when the node closes the channel.
  ::signal(SIGINT, SIG_IGN);
  ::signal(SIGTERM, SIG_IGN);
  ::signal(SIGPIPE, SIG_IGN);
  if (Status st = DropToFront(HostRunDir() + "/empty"); !st.ok()) {
    std::cerr << "space api-front: " << st.ToString() << "\n";
    return 1;
  }
  // The uid change cleared the parent-death signal: armed again, then the node checked again.
  // (It reaches the front only from a node that kept CAP_KILL, since the kernel sends it with
  // the dying node's credentials; otherwise the front ends when its channel closes.)
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != node_pid) return 1;
  api::HttpServerConfig hc;
  hc.listen_fd = listen_fd;
  Forwarder forwarder(channel_fd);
  api::HttpServer server(hc, [&forwarder](api::Request& req, api::Responder& res) { forwarder.Handle(req, res); });
  // "ready" before the first accept: a client already waiting in the listen queue (one that
  // connected while the previous front was being replaced) is forwarded at once, and its
  // datagram must not reach the node ahead of "ready", which would take it for a failed start.
  if (Status st = SendDatagram(channel_fd, "ready", {}, api::kConnectionChannelLimits); !st.ok()) return 1;
  if (auto port = server.Start(); !port.ok()) {
    std::cerr << "space api-front: " << port.status().ToString() << "\n";
    return 1;  // the node sees the channel close and starts another front
  }
  // The node never writes to the channel: it becomes readable (EOF) or hangs up when the node
  // closes it, at shutdown or on its death.
  pollfd p{channel_fd, POLLIN | POLLRDHUP, 0};
  while (RetryEintr([&] { return ::poll(&p, 1, -1); }) <= 0) {
  }
  return 0;
}

}  // namespace space::front
