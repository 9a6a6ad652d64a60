#include "gateway/worker_seccomp.h"

#include <sched.h>
#include <seccomp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <string>

namespace space::gateway {
namespace {

// Neither the gateway nor the libraries it uses make these; each is a way out of the worker
// (exec, namespaces, mounts, tracing) or a large kernel surface.
constexpr const char* kRefused[] = {
    "execve", "execveat",                                   // the worker runs no other program
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp",
    "mount", "umount2", "pivot_root", "chroot", "unshare", "setns",
    "fsopen", "fsmount", "fsconfig", "fspick", "open_tree", "move_mount", "mount_setattr",
    "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load", "reboot",
    "bpf", "perf_event_open", "userfaultfd",
    "keyctl", "add_key", "request_key",
    "open_by_handle_at", "name_to_handle_at",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    "swapon", "swapoff", "acct", "quotactl", "quotactl_fd", "syslog",
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "iopl", "ioperm",
    "pidfd_open", "pidfd_getfd", "pidfd_send_signal", "tkill",
    "vm86", "vm86old", "nfsservctl", "uselib",
};

// Socket families the gateway never opens: routing and firewall control (netlink), raw
// frames (packet, XDP), kernel crypto (AF_ALG) and rarely used protocol stacks.
constexpr int kRefusedFamilies[] = {AF_NETLINK, AF_PACKET, AF_KEY,  AF_ALG, AF_VSOCK, AF_XDP,
                                    AF_TIPC,    AF_RDS,    AF_LLC,  AF_BLUETOOTH, AF_CAN, AF_NFC};

// Namespace flags of clone(2); one rule each, since libseccomp compares an argument once per
// rule.
constexpr unsigned long kNamespaceFlags[] = {CLONE_NEWNS,  CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC,
                                             CLONE_NEWUSER, CLONE_NEWPID,   CLONE_NEWNET};

struct CtxDeleter {
  void operator()(void* ctx) const { seccomp_release(ctx); }
};

Status RuleError(const std::string& what, int rc) { return ErrnoStatus("seccomp rule", what, -rc); }

}  // namespace

Status LoadWorkerSeccomp() {
  std::unique_ptr<void, CtxDeleter> ctx(seccomp_init(SCMP_ACT_ALLOW));
  if (!ctx) return Internal("seccomp_init failed");
  void* c = ctx.get();
  int rc = seccomp_attr_set(c, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
  if (rc < 0) return RuleError("badarch", rc);
  rc = seccomp_attr_set(c, SCMP_FLTATR_CTL_TSYNC, 1);
  if (rc < 0) return RuleError("tsync", rc);

  for (const char* name : kRefused) {
    int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) continue;  // not a syscall on this architecture
    if ((rc = seccomp_rule_add(c, SCMP_ACT_ERRNO(EPERM), nr, 0)) < 0) return RuleError(name, rc);
  }
  // clone3 hides its flags in memory; ENOSYS makes glibc fall back to clone, checked below.
  if ((rc = seccomp_rule_add(c, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0)) < 0) return RuleError("clone3", rc);
  for (unsigned long flag : kNamespaceFlags) {
    rc = seccomp_rule_add(c, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1, SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag));
    if (rc < 0) return RuleError("clone", rc);
  }
  for (int family : kRefusedFamilies) {
    rc = seccomp_rule_add(c, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socket), 1,
                          SCMP_A0(SCMP_CMP_EQ, static_cast<scmp_datum_t>(family)));
    if (rc < 0) return RuleError("socket", rc);
  }
  // Signals only to itself (abort() raises SIGABRT with tgkill on its own pid).
  const auto self = static_cast<scmp_datum_t>(::getpid());
  for (int nr : {SCMP_SYS(kill), SCMP_SYS(tgkill), SCMP_SYS(rt_sigqueueinfo), SCMP_SYS(rt_tgsigqueueinfo)}) {
    rc = seccomp_rule_add(c, SCMP_ACT_ERRNO(EPERM), nr, 1, SCMP_A0(SCMP_CMP_NE, self));
    if (rc < 0) return RuleError("signals", rc);
  }
  if ((rc = seccomp_load(c)) < 0) return RuleError("load", rc);
  return Status::Ok();
}

}  // namespace space::gateway
