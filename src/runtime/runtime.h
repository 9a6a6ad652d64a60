// Runtimes: what starts a sandbox's init (`spaced`) over a prepared root and tears it down.
// `ns` runs it inside fresh Linux namespaces (runtime/ns/); `vm` boots it as PID 1 of a
// QEMU microVM whose disk image lives in that root (runtime/vm/).
//
// Owned by the node agent; one instance of each per node. Thread-safe: Launch/Destroy may
// run concurrently for different sandboxes.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/privileged_acts.h"
#include "common/result.h"
#include "common/unique_fd.h"

namespace space::runtime {

// Where, inside a sandbox's root directory, the vm runtime keeps its disk and checkpoint
// (vm/vm_runtime.h); the node's, made by its root broker (vm_state_dir).
inline constexpr char kVmStateDir[] = ".space-vm";

// The number of uids/gids each sandbox gets: [uid_base, uid_base + kUidRangeSize).
inline constexpr uint32_t kUidRangeSize = 65536;

// The task limit (processes and threads) for a sandbox with `memory_bytes`: one task per
// 2 MiB, at least 128, at most 8192 (512 MiB -> 256). Why so few: a fork bomb's harm to
// its neighbours grows with the tasks it can hold, mostly runnable in fork and exit while
// the CPU quota lets it grow (measured in docs/security.md, "Abuse": 1024 tasks slowed a
// neighbour's exec 2.4x, 256 left it unchanged); a real program with more tasks than that
// per 2 MiB of memory does not fit in the memory anyway.
inline uint64_t PidsMaxFor(uint64_t memory_bytes) {
  const uint64_t n = memory_bytes >> 21;
  return n < 128 ? 128 : (n > 8192 ? 8192 : n);
}

struct Limits {
  double cpus = 1.0;                        // CPU bandwidth in cores
  uint64_t memory_bytes = 512ull << 20;     // memory (+swap where the host has swap accounting)
  uint64_t pids_max = PidsMaxFor(512ull << 20);  // tasks; callers set PidsMaxFor(memory_bytes)
};

// What a sandbox uses at one moment, read from its cgroups.
struct ResourceUsage {
  uint64_t cpu_ns = 0;        // CPU time consumed since it started, all tasks
  uint64_t memory_bytes = 0;  // memory charged now (page cache included)
  uint64_t cache_bytes = 0;   // of which page cache
  // How often the kernel enforced a limit since the sandbox started (its cgroup's counters):
  // processes the memory cgroup's OOM killer ended, and forks refused at pids.max.
  uint64_t oom_kills = 0;
  uint64_t pids_max_hits = 0;
};

// A validated description of one sandbox to start. Built by the node; the runtime never
// parses user input.
// A volume mounted into an ns sandbox (node/volumes.h).
struct VolumeMountSpec {
  std::string host_dir;  // the pool's subvolume (a trusted node path)
  std::string path;      // where the sandbox sees it: absolute, normalized, not /, /proc, /sys or /dev
  bool read_only = false;
};

struct SandboxSpec {
  std::string id;            // "sbx_..." (also the cgroup leaf name)
  std::string rootfs;        // host path of the sandbox's writable root directory
  std::string hostname;      // <= 64 bytes
  uint32_t uid_base = 0;     // host uid/gid of sandbox uid 0; a multiple of kUidRangeSize
  Limits limits;
  std::string guest_binary;  // host path of the static `spaced` executable
  std::vector<std::string> guest_env;  // initial environment of spaced ("K=V")
  // vm only: the template's digest (the key of its cached disk image) and, to restore a
  // full checkpoint instead of booting, the host path of its memory and device state.
  std::string template_digest;
  std::string restore_state;
  // vm only: the host tap the guest's NIC is joined to (borrowed; the VMM gets its own copy),
  // -1 for a NIC whose frames go nowhere; and the NIC's MAC ("52:54:00:xx:xx:xx"; empty: a
  // random one).
  int net_tap_fd = -1;
  std::string guest_mac;
  // vm only: the size the guest's disk grows to (its disk_mb); a disk already bigger, such as
  // a template's image with more in it, keeps its size. 0: the disk keeps the size it has.
  uint64_t disk_bytes = 0;
  // ns only: volumes attached in the sandbox's mount namespace before pivot_root, in order.
  std::vector<VolumeMountSpec> volumes;
};

// Checks a volume's mount path: absolute, at most 1024 bytes, no empty, "." or ".." component,
// no NUL, not "/" and not under /proc, /sys or /dev (the runtime's own mounts).
Status ValidateVolumePath(const std::string& path);

struct LaunchedSandbox {
  pid_t pid = -1;      // host pid of the sandbox's init (spaced)
  UniqueFd pidfd;      // pidfd of init, for race-free signalling and exit notification
  UniqueFd channel;    // node end of the guest channel (SOCK_STREAM, CLOEXEC)
  // Named setup steps with their durations in microseconds, in execution order.
  std::vector<std::pair<std::string, int64_t>> steps_us;
  // Restored from a full checkpoint: the guest is mid-conversation and sends no hello.
  bool restored = false;
  // vm only: the disk's size as the VMM has it, which a restored guest's root filesystem is
  // grown to (a booted guest grows its own at boot). 0 for ns.
  uint64_t disk_bytes = 0;
};

class CgroupActs;  // cgroup_acts.h

// Runs `argv(target)` over the tree at `tree`, which the program sees at `target`, with
// `stdin_fd` (-1: none) as its stdin; OK only on exit status 0.
using TreeToolArgv = std::function<std::vector<std::string>(const std::string& target)>;
using TreeToolRunner = std::function<Status(const std::string& tree, const TreeToolArgv& argv, int stdin_fd)>;

struct RuntimeConfig {
  std::string run_dir;               // host scratch dir, e.g. <data-dir>/run (created)
  std::string cgroup_name = "space"; // parent cgroup name under each hierarchy
  std::string cgroup_root = "/sys/fs/cgroup";  // where the cgroup hierarchies are mounted
  // Who writes the sandbox cgroups: the root broker's acts for cgroup_name, or null for this
  // process. The runtime makes (and at Close removes) the parents itself either way.
  std::shared_ptr<CgroupActs> cgroup_acts;
  // Who does the other acts the runtime may lack the privilege for: id maps, idmapped clones,
  // kills of its children, the vm state dir (common/privileged_acts.h: the root broker). Null:
  // this process does them. Not owned.
  PrivilegedActs* privileged = nullptr;
  // How long a launch may spend in the child's setup before it is killed.
  int64_t child_setup_timeout_ms = 10000;
  // vm only: host-wide cache of the guest kernel, initramfs and template disk images.
  std::string vm_cache_dir = "/var/cache/space/vm";
  // vm only: "auto", "kvm" or "tcg" (runtime/vm/kvm_probe.h Accel).
  std::string vm_accel = "auto";
  // vm only: runs the program that makes a template's disk image from a fresh root (which
  // holds files of other owners, maybe private) where it can read that tree without a host
  // privilege: the node's build jail. Empty: here, as the caller.
  TreeToolRunner tree_runner;
};

class Runtime {
 public:
  virtual ~Runtime() = default;

  // Starts the sandbox. On failure nothing is left behind and the Status names the setup
  // step and errno ("sandbox sbx_x: step mount_proc: mount proc: EPERM ...").
  virtual Result<LaunchedSandbox> Launch(const SandboxSpec& spec) = 0;

  // Kills every process of the sandbox (via its cgroup), reaps init, removes its cgroups
  // and scratch dir. Idempotent: succeeds when the sandbox is already gone.
  virtual Status Destroy(const std::string& id) = 0;

  // Freezes / thaws every process of the sandbox (cgroup freezer, v1 or v2).
  virtual Status Freeze(const std::string& id) = 0;
  virtual Status Thaw(const std::string& id) = 0;

  // Rewrites the cpu, memory and pids limits of a running sandbox (a warm-pool sandbox
  // handed out with other limits than it was started with). /dev/shm keeps the size it was
  // mounted with, so callers change memory_bytes only for sandboxes started with the same.
  virtual Status UpdateLimits(const std::string& id, const Limits& limits) = 0;

  virtual Result<ResourceUsage> Usage(const std::string& id) = 0;

  // Sandbox ids that have a cgroup or scratch dir on this host right now.
  virtual Result<std::set<std::string>> ListPresent() = 0;

  // Called once by a stopping node after it destroyed its sandboxes: removes what the
  // runtime made for itself on the host (its parent cgroups) if nothing is left in it, so a
  // node that stops for good leaves nothing behind. A restart makes them again.
  virtual Status Close() { return Status::Ok(); }

  // "v1" or "v2": which cgroup layout limits are applied through.
  virtual std::string cgroup_version() const = 0;
  // What runs the sandboxes' CPUs when that is a choice (vm: "kvm", "tcg", or "kvm-unproven"
  // until the first launch proves it); "" for a runtime on the host's own CPU.
  virtual std::string accelerator() { return ""; }

  // Full checkpoints (memory and device state), where the runtime has them (vm). Checkpoint
  // stops the sandbox and writes that state to the new file `state_path`; the sandbox stays
  // stopped until Thaw or Destroy, so its disk can be copied consistent with the state.
  virtual bool full_checkpoints() const { return false; }
  virtual Status Checkpoint(const std::string& id, const std::string& state_path) {
    (void)state_path;
    return Conflict("sandbox " + id + ": this runtime keeps files, not memory (no full checkpoints)");
  }
};

// The `ns` runtime.
class NsRuntime : public Runtime {
 public:
  // Probes the host (cgroup v1/v2 layout, idmapped mounts), prepares the seccomp program
  // and the parent cgroups.
  static Result<std::unique_ptr<NsRuntime>> Create(const RuntimeConfig& config);
};

}  // namespace space::runtime
