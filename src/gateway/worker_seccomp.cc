#include "gateway/worker_seccomp.h"

#include <sys/socket.h>

#include <iterator>

#include "common/seccomp_denylist.h"

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

}  // namespace

Status LoadWorkerSeccomp() {
  DenyList list;
  list.syscalls.assign(std::begin(kRefused), std::end(kRefused));
  list.socket_families.assign(std::begin(kRefusedFamilies), std::end(kRefusedFamilies));
  return LoadDenyList(list);  // no new namespaces, signals only to itself
}

}  // namespace space::gateway
