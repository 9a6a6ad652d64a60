#include "common/seccomp_denylist.h"

#include <sched.h>
#include <seccomp.h>
#include <unistd.h>

#include <memory>
#include <string>

namespace space {
namespace {

// Namespace flags of clone(2); one rule each, since libseccomp compares an argument once per
// rule.
constexpr unsigned long kNamespaceFlags[] = {CLONE_NEWNS,  CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC,
                                             CLONE_NEWUSER, CLONE_NEWPID,   CLONE_NEWNET};

struct CtxDeleter {
  void operator()(void* ctx) const { seccomp_release(ctx); }
};

Status RuleError(const std::string& what, int rc) { return ErrnoStatus("seccomp rule", what, -rc); }

}  // namespace

std::vector<const char*> KernelSurfaceSyscalls() {
  return {
      "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load", "reboot",
      "bpf", "perf_event_open", "userfaultfd",
      "keyctl", "add_key", "request_key",
      "open_by_handle_at", "name_to_handle_at",
      "io_uring_setup", "io_uring_enter", "io_uring_register",
      "swapon", "swapoff", "acct", "quotactl", "quotactl_fd", "lookup_dcookie", "syslog",
      "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "iopl", "ioperm",
      "vm86", "vm86old", "nfsservctl", "uselib",
  };
}

std::vector<const char*> HelperRefusedSyscalls() {
  std::vector<const char*> list = KernelSurfaceSyscalls();
  list.insert(list.end(), {
      "execve", "execveat",  // a helper runs no other program
      "ptrace", "process_vm_readv", "process_vm_writev", "kcmp",
      "mount", "umount2", "pivot_root", "chroot", "unshare", "setns",
      "fsopen", "fsmount", "fsconfig", "fspick", "open_tree", "move_mount", "mount_setattr",
      "pidfd_open", "pidfd_getfd", "pidfd_send_signal", "tkill",
  });
  return list;
}

Status LoadDenyList(const DenyList& list) {
  std::unique_ptr<void, CtxDeleter> ctx(seccomp_init(SCMP_ACT_ALLOW));
  if (!ctx) return Internal("seccomp_init failed");
  void* c = ctx.get();
  int rc = seccomp_attr_set(c, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
  if (rc < 0) return RuleError("badarch", rc);
  rc = seccomp_attr_set(c, SCMP_FLTATR_CTL_TSYNC, 1);
  if (rc < 0) return RuleError("tsync", rc);

  for (const char* name : list.syscalls) {
    int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) continue;  // not a syscall on this architecture
    if ((rc = seccomp_rule_add(c, SCMP_ACT_ERRNO(EPERM), nr, 0)) < 0) return RuleError(name, rc);
  }
  if (list.no_new_namespaces) {
    if ((rc = seccomp_rule_add(c, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0)) < 0) return RuleError("clone3", rc);
    for (unsigned long flag : kNamespaceFlags) {
      rc = seccomp_rule_add(c, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1, SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag));
      if (rc < 0) return RuleError("clone", rc);
    }
  }
  for (int family : list.socket_families) {
    rc = seccomp_rule_add(c, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socket), 1,
                          SCMP_A0(SCMP_CMP_EQ, static_cast<scmp_datum_t>(family)));
    if (rc < 0) return RuleError("socket", rc);
  }
  if (list.signals_only_to_self) {
    // abort() raises SIGABRT with tgkill on the caller's own pid, which stays allowed.
    const auto self = static_cast<scmp_datum_t>(::getpid());
    for (int nr : {SCMP_SYS(kill), SCMP_SYS(tgkill), SCMP_SYS(rt_sigqueueinfo), SCMP_SYS(rt_tgsigqueueinfo)}) {
      rc = seccomp_rule_add(c, SCMP_ACT_ERRNO(EPERM), nr, 1, SCMP_A0(SCMP_CMP_NE, self));
      if (rc < 0) return RuleError("signals", rc);
    }
  }
  for (const auto& rule : list.arg_must_equal) {
    int nr = seccomp_syscall_resolve_name(rule.syscall);
    if (nr == __NR_SCMP_ERROR) continue;
    scmp_arg_cmp cmp = {rule.arg, SCMP_CMP_NE, static_cast<scmp_datum_t>(rule.value), 0};
    if ((rc = seccomp_rule_add_array(c, SCMP_ACT_ERRNO(EPERM), nr, 1, &cmp)) < 0) return RuleError(rule.syscall, rc);
  }
  if ((rc = seccomp_load(c)) < 0) return RuleError("load", rc);
  return Status::Ok();
}

}  // namespace space
