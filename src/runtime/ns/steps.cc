#include "runtime/ns/steps.h"

namespace space::runtime::ns {

const char* StepName(Step step) {
  switch (step) {
    case Step::kValidateSpec: return "validate_spec";
    case Step::kPrepareDirs: return "prepare_dirs";
    case Step::kMountPoints: return "mount_points";
    case Step::kOpenGuest: return "open_guest";
    case Step::kChannel: return "channel";
    case Step::kCgroupCreate: return "cgroup_create";
    case Step::kBuildPlan: return "build_plan";
    case Step::kClone: return "clone";
    case Step::kIdMaps: return "id_maps";
    case Step::kCgroupAttach: return "cgroup_attach";
    case Step::kIdmapRoot: return "idmap_root";
    case Step::kIdmapVolumes:
      return "idmap_volumes";
    case Step::kSendGo: return "send_go";
    case Step::kChildSetup: return "child_setup";
    case Step::kWaitGo: return "wait_go";
    case Step::kBecomeRoot: return "become_root";
    case Step::kUnshareCgroupns: return "unshare_cgroupns";
    case Step::kMakePrivate: return "make_private";
    case Step::kAttachRoot: return "attach_root";
    case Step::kMountProc: return "mount_proc";
    case Step::kMaskProc: return "mask_proc";
    case Step::kMountSys: return "mount_sys";
    case Step::kMountDev: return "mount_dev";
    case Step::kMountVolumes:
      return "mount_volumes";
    case Step::kPivotRoot: return "pivot_root";
    case Step::kSetHostname: return "set_hostname";
    case Step::kLoopbackUp: return "loopback_up";
    case Step::kSetupFds: return "setup_fds";
    case Step::kNoNewPrivs: return "no_new_privs";
    case Step::kSeccomp: return "seccomp";
    case Step::kExec: return "exec";
    case Step::kCount: break;
  }
  return "unknown";
}

const char* CallName(Call call) {
  switch (call) {
    case Call::kNone: return "";
    case Call::kRecvmsg: return "recvmsg";
    case Call::kSigaction: return "sigaction";
    case Call::kSetgroups: return "setgroups";
    case Call::kSetresgid: return "setresgid";
    case Call::kSetresuid: return "setresuid";
    case Call::kUnshare: return "unshare";
    case Call::kMount: return "mount";
    case Call::kMoveMount: return "move_mount";
    case Call::kFchdir: return "fchdir";
    case Call::kMkdir: return "mkdir";
    case Call::kMknod: return "mknod";
    case Call::kSymlink: return "symlink";
    case Call::kPivotRoot: return "pivot_root";
    case Call::kUmount2: return "umount2";
    case Call::kChdir: return "chdir";
    case Call::kSethostname: return "sethostname";
    case Call::kSocket: return "socket";
    case Call::kIoctl: return "ioctl";
    case Call::kOpen: return "open";
    case Call::kDup: return "dup";
    case Call::kCloseRange: return "close_range";
    case Call::kPrctl: return "prctl";
    case Call::kSeccomp: return "seccomp";
    case Call::kExecveat: return "execveat";
    case Call::kCount: break;
  }
  return "unknown";
}

}  // namespace space::runtime::ns
