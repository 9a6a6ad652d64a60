// The wire protocol between the node agent and the root broker (broker.h).
//
// One request and its reply are one SOCK_SEQPACKET datagram each: a JSON object of at most
// kMaxMessageBytes, with at most kMaxFds descriptors attached (SCM_RIGHTS). The node sends one
// request at a time and waits for its reply. The broker holds privileges the node has given
// up, so it decodes every request as hostile: DecodeRequest refuses oversized and malformed
// datagrams, unknown ops, unknown, missing or mistyped fields and values out of range, and
// requires exactly the descriptors the op takes. No request names a host path but import_open's
// source, which the broker resolves inside the admin's --import-root as if it were the root; the
// broker derives every other path, link name and table name from its own state and from slot
// numbers.
//
//   op                 fields                  fds   reply
//   hello              -                       0     {pid}
//   net_acquire        -                       0     {net_slot}      (takes a network slot)
//   firewall_install   {ports}                 0     {}              (needs the slot)
//   net_attach         {uid_slot}              1     {address}       (the fd: the init's pidfd)
//   net_tap            {uid_slot}              0     {address} + 1 fd (a vm sandbox's tap: the
//                                                                      link sp<net>-<uid slot>,
//                                                                      gone when the fd closes)
//   net_detach         {uid_slot}              0     {}
//   net_reconcile      {keep: [uid_slot...]}   0     {}
//   net_release        -                       0     {}              (links, table, slot)
//   seqpacket_pair     {send_buffer_bytes}     0     {} + 2 fds
//   cgroup_create      {runtime, id, limits}   0     {}              (runtime: ns | vm)
//   cgroup_update      {runtime, id, limits}   0     {}
//   cgroup_attach      {runtime, id}           1     {}              (the fd: the process's pidfd)
//   cgroup_freeze      {runtime, id, frozen}   0     {}              (one write; the node waits)
//   cgroup_kill        {runtime, id}           0     {}              (one pass; the node repeats)
//   cgroup_remove      {runtime, id}           0     {}              (unavailable while busy)
//   cgroup_parents     {runtime, present}      0     {}              (make, or remove where empty)
//   kill_child         -                       1     {}              (the fd: a child's pidfd)
//   userns_map         {uid_slot, shape, kvm_gid} 1  {}              (the fd: a child's pidfd)
//   uid_acquire        {preferred}             0     {uid_slot}
//   uid_release        {uid_slot}              0     {}
//   idmap_tree         {uid_slot, read_only}   2     {} + 1 fd       (fds: a pool directory, a
//                                                                      child's pidfd; reply: a
//                                                                      detached idmapped clone,
//                                                                      read-only for a snapshot)
//   subvol_delete      {name}                  1     {}              (fd: the pool directory
//                                                                      holding subvolume name)
//   qgroup_limit       {bytes}                 1     {}              (fd: a sandbox root)
//   quota_rescan       -                       0     {started}       (the pool's, if inconsistent)
//   child_nice         {nice}                  1     {}              (fd: a child's pidfd; 0..19)
//   node_thread_nice   {tid, nice}             0     {}              (a thread of the node; 0..19)
//   subvol_snapshot    {name, read_only}       2     {}              (fds: a pool subvolume, the
//                                                                      pool directory to hold the
//                                                                      snapshot as name)
//   subvol_create      {name}                  1     {}              (fd: the pool directory to
//                                                                      hold an empty subvolume,
//                                                                      root's, as name)
//   vm_state_dir       -                       1     {}              (fd: a sandbox root; makes
//                                                                      its .space-vm, the node's)
//   import_open        {source}                0     {} + 1 fd       (a template import's source
//                                                                      inside the import root: a
//                                                                      tarball open for reading,
//                                                                      or a directory, O_PATH, for
//                                                                      a read-only idmap_tree)
//
// A reply is {"ok": true, ...} or {"ok": false, "code": <StatusCode name>, "message": ...}.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/datagram.h"
#include "common/result.h"
#include "common/unique_fd.h"
#include "network/firewall.h"
#include "runtime/ns/userns.h"
#include "runtime/runtime.h"

namespace space::broker {

inline constexpr size_t kMaxMessageBytes = 128 << 10;
inline constexpr size_t kMaxFds = 2;
// Network slots 0..99 (link prefixes sp00- .. sp99-); uid slots as in common/host_slots.h.
inline constexpr int64_t kMaxNetSlots = 100;
// Send buffers a seqpacket_pair may ask for: enough for the gateway's 1 MiB messages twice.
inline constexpr int64_t kMaxSendBufferBytes = 4 << 20;

enum class Op {
  kHello,
  kNetAcquire,
  kFirewallInstall,
  kNetAttach,
  kNetDetach,
  kNetReconcile,
  kNetRelease,
  kSeqpacketPair,
  kCgroupCreate,
  kCgroupUpdate,
  kCgroupAttach,
  kCgroupFreeze,
  kCgroupKill,
  kCgroupRemove,
  kKillChild,  // SIGKILL to the node's child behind the one descriptor (a pidfd)
  kUsernsMap,  // writes uid_map and gid_map of the node's child behind the pidfd (userns.h)
  kUidAcquire,
  kUidRelease,  // leases of host uid slots (common/host_slots.h) to the node
  kIdmapTree,   // a detached idmapped clone of a pool directory for a sandbox-shaped child's namespace
  kSubvolDelete,
  kQgroupLimit,
  kQuotaRescan,  // the pool's btrfs acts that need CAP_SYS_ADMIN
  kChildNice,
  kNodeThreadNice,  // nice values 0..19 that only CAP_SYS_NICE may set (common/nice.h)
  kSubvolSnapshot,  // a snapshot of a pool subvolume whose root the node does not own (CAP_FOWNER)
  kCgroupParents,   // makes or removes a runtime's parent cgroups (CAP_DAC_OVERRIDE: v1 roots are 0555)
  kSubvolCreate,    // an empty subvolume owned by root, for a tree a jail writes as root of its namespace
  kVmStateDir,      // a vm sandbox root's .space-vm, made and given to the node's uid (CAP_CHOWN)
  kImportOpen,      // a template import's source, which the node may not read (CAP_DAC_OVERRIDE)
  kNetTap,          // a vm sandbox's host link: a tap device whose descriptor the VMM holds (CAP_NET_ADMIN)
};

// Which runtime's parent cgroup a cgroup_* request acts under: the broker's own cgroup name
// (ns) or that name + "-vm" (vm).
enum class CgroupRuntime { kNs, kVm };
// Limits a cgroup_create or cgroup_update may write (the runtimes' own checks, plus caps).
inline constexpr double kMaxCpus = 4096;
inline constexpr uint64_t kMinMemoryBytes = 4ull << 20;
inline constexpr uint64_t kMaxMemoryBytes = 1ull << 44;  // 16 TiB
inline constexpr uint64_t kMaxPids = 1ull << 22;
inline constexpr size_t kMaxSubvolNameLen = 128;
inline constexpr int64_t kMaxQgroupLimitBytes = int64_t{1} << 60;
// Nice values the node may ask for: normal priority or lower, never above normal.
inline constexpr int64_t kMaxNice = 19;
// Thread ids: at most the kernel's PID_MAX_LIMIT.
inline constexpr int64_t kMaxTid = int64_t{1} << 22;
// An import's source: an absolute path of at most PATH_MAX bytes.
inline constexpr size_t kMaxImportSourceLen = 4096;

std::string_view OpName(Op op);

struct Request {
  Op op = Op::kHello;
  network::GatewayPorts ports;      // firewall_install
  int64_t uid_slot = -1;            // net_attach, net_tap, net_detach, userns_map, uid_release, idmap_tree
  int64_t preferred = -1;           // uid_acquire: the slot wanted, if free (-1: the lowest free)
  std::vector<int64_t> keep;        // net_reconcile: uid slots whose links stay
  int64_t send_buffer_bytes = 0;    // seqpacket_pair
  CgroupRuntime runtime = CgroupRuntime::kNs;  // cgroup_*
  std::string id;                   // cgroup_*: the sandbox
  runtime::Limits limits;           // cgroup_create, cgroup_update
  bool frozen = false;              // cgroup_freeze
  bool present = false;             // cgroup_parents: make them (true) or remove the empty ones (false)
  // userns_map (with uid_slot): the map's shape, and the /dev/kvm group a VMM's map adds
  // (0: none; only with kOneId).
  runtime::ns::IdMapShape shape = runtime::ns::IdMapShape::kSandbox;
  int64_t kvm_gid = 0;
  std::string name;                 // subvol_delete, subvol_snapshot, subvol_create: one path component ([A-Za-z0-9_.-], not . or ..)
  int64_t bytes = 0;                // qgroup_limit: 1..kMaxQgroupLimitBytes
  bool read_only = false;           // idmap_tree: a read-only clone (what a snapshot's must be); subvol_snapshot
  int64_t nice = 0;                 // child_nice, node_thread_nice: 0..kMaxNice
  int64_t tid = 0;                  // node_thread_nice: 1..kMaxTid
  std::string source;               // import_open: absolute, no NUL, at most kMaxImportSourceLen
};

// How many descriptors a request of `op` carries.
size_t FdsFor(Op op);

// The datagram for a request (fields of other ops are left out).
std::string EncodeRequest(const Request& request);
// Parses and validates one datagram from the node that arrived with `fd_count` descriptors.
Result<Request> DecodeRequest(std::string_view bytes, size_t fd_count);

std::string EncodeOk(nlohmann::json fields = nlohmann::json::object());
std::string EncodeError(const Status& status);
// The node's view of a reply: its fields, or the broker's error as a Status.
Result<nlohmann::json> DecodeReply(std::string_view bytes);

// One datagram over the broker channel (common/datagram.h), within kMaxMessageBytes and
// kMaxFds: Receive closes the descriptors of a datagram over them and refuses it.
inline constexpr DatagramLimits kChannelLimits{kMaxMessageBytes, kMaxFds, "root broker channel"};
Status SendDatagram(int socket, std::string_view bytes, const std::vector<int>& fds = {});
// Blocks until one datagram arrives. kUnavailable when the peer is gone.
Result<Datagram> ReceiveDatagram(int socket);

}  // namespace space::broker
