// The named setup steps of a sandbox launch, and the report the child sends the parent.
//
// Launch is a straight list of steps; parent steps run in the node process, child steps
// run between clone() and execveat() in the sandbox's first process. Step names appear in
// errors ("sandbox sbx_1: step mount_proc: mount proc: EPERM ...") and in
// LaunchedSandbox::steps_us, so they are part of the node's observable behaviour.
#pragma once

#include <cstddef>
#include <cstdint>

namespace space::runtime::ns {

enum class Step : uint16_t {
  // Parent (node process), before clone.
  kValidateSpec,
  kPrepareDirs,
  kMountPoints,
  kOpenGuest,
  kChannel,
  kCgroupCreate,
  kBuildPlan,
  kClone,
  // Parent, after clone: the child is waiting for "go".
  kIdMaps,
  kCgroupAttach,
  kIdmapRoot,
  kIdmapVolumes,
  kSendGo,
  kChildSetup,  // parent-side: from "go" until the child's exec closed the sync socket
  // Child, in execution order.
  kWaitGo,
  kUnshareCgroupns,
  kMakePrivate,
  kAttachRoot,
  kBecomeRoot,
  kMountProc,
  kMaskProc,
  kMountSys,
  kMountDev,
  kMountVolumes,
  kPivotRoot,
  kSetHostname,
  kLoopbackUp,
  kSetupFds,
  kNoNewPrivs,
  kSeccomp,
  kExec,
  kCount,
};

const char* StepName(Step step);

// The syscall a child step failed in, so the parent can name it in the Status.
enum class Call : uint16_t {
  kNone,
  kRecvmsg,
  kSigaction,
  kSetgroups,
  kSetresgid,
  kSetresuid,
  kUnshare,
  kMount,
  kMoveMount,
  kFchdir,
  kMkdir,
  kMknod,
  kSymlink,
  kPivotRoot,
  kUmount2,
  kChdir,
  kSethostname,
  kSocket,
  kIoctl,
  kOpen,
  kDup,
  kCloseRange,
  kPrctl,
  kSeccomp,
  kExecveat,
  kCount,
};

const char* CallName(Call call);

// One step report from child to parent. The child sends them in batches (one
// SOCK_SEQPACKET message of whole reports) before exec or when a step fails.
struct ChildReport {
  enum Kind : uint8_t {
    kDone = 0,    // step finished; duration_ns is valid
    kFailed = 1,  // step failed with err; the child _exit()s right after
    kNote = 2,    // op `op` failed with err but a fallback was used (e.g. sysfs -> tmpfs)
  };
  uint8_t kind = kDone;
  uint8_t pad = 0;
  uint16_t step = 0;    // Step
  uint16_t call = 0;    // Call
  uint16_t op = kNoOp;  // index into ChildPlan::ops, or kNoOp
  int32_t err = 0;      // errno for kFailed / kNote
  uint32_t pad2 = 0;
  int64_t duration_ns = 0;

  static constexpr uint16_t kNoOp = 0xffff;
};
static_assert(sizeof(ChildReport) == 24);

// Most reports one message carries: one per child step plus notes; more are split.
inline constexpr size_t kMaxChildReports = 32;

}  // namespace space::runtime::ns
