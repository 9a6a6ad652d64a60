// Node: runs sandboxes on this machine. Turns validated requests into lifecycle operations,
// keeps each live sandbox's guest channel and processes, enforces timeouts, records commands
// and audit events, and reconciles leftovers after a crash.
//
// Owned by `space dev` / `space node`. Thread-safe: every public method may be called from
// any HTTP thread. Every method taking (team, id) answers not_found for another team's
// sandbox, so ids never leak across teams.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "broker/broker_client.h"
#include "common/host_slots.h"
#include "node/dir_watch_stream.h"
#include "node/guest_client.h"
#include "node/operations.h"
#include "node/process.h"
#include "node/tree_jail.h"
#include "node/uid_slot_lease.h"
#include "node/warm_pool.h"
#include "credentials/kek.h"
#include "gateway/gateway.h"
#include "node/gateway_process.h"
#include "runtime/runtime.h"
#include "snapshot/local_blob_store.h"
#include "storage/pool.h"
#include "store/store.h"

namespace space::node {

struct NodeConfig {
  std::string data_dir;          // pool, run dir, api key
  std::string guest_binary;      // static spaced
  std::string node_name = "local";
  std::string uid_lock_dir;      // default: <host run dir>/uid-slots (host-wide, tmpfs)
  std::string store_dir;         // snapshot store; default <data_dir>/store
  // Key-encryption key for credential secrets, outside the database; SPACE_KEK (64 hex
  // characters) overrides. Default <data_dir>/credentials.kek (mode 0600).
  std::string kek_path;
  int workers = 4;
  bool force_overlay = false;
  std::string import_root = "/";  // template imports read only inside it (storage/pool.h)
  uint64_t loop_image_bytes = 64ull << 30;
  // The pool as `space dev` brought it into service while it still held CAP_SYS_ADMIN
  // (storage::MountPool); unset: Start mounts it itself.
  std::optional<storage::PoolMount> pool_mount;
  // Egress (docs/egress.md). Off: sandboxes get loopback only and egress profiles are refused.
  bool egress = true;
  std::string egress_upstream_dns;  // "ip[:port]" the gateway resolves with; default resolv.conf
  std::string egress_upstream_ca;   // extra CA file trusted for upstream TLS (tests)
  // The same file's PEM text, read by `space dev` while it was root: the node, once it runs as
  // its own uid, may not read an admin's root-only file.
  std::string egress_upstream_ca_pem;
  // The root broker (broker/broker.h), which does the network's privileged acts; needed for
  // egress. Not owned.
  broker::BrokerClient* broker = nullptr;
  // Warm pools (node_warm.cc): template -> sandboxes kept pre-created (root cloned, runtime
  // and spaced up, owned by nobody) to hand out on create. Empty: every create is cold.
  std::map<std::string, int> warm_pool;
};

// A create request after the API validated its shape.
struct CreateRequest {
  std::string team;
  std::string template_name = "base";
  double cpus = 1;
  int64_t memory_mb = 512;
  int64_t disk_mb = 2048;
  int64_t timeout_s = 300;
  std::string on_timeout = "destroy";
  std::map<std::string, std::string> env;
  std::map<std::string, std::string> metadata;
  std::vector<std::string> egress_profiles;
  std::string from_snapshot;     // restore this snapshot instead of cloning the template
  nlohmann::json snapshot_policy = nlohmann::json::object();  // {"every_s","keep","max_age_s"} or {}
  std::vector<std::string> credentials;  // names; the sandbox gets placeholders, never secrets
  std::string runtime = "ns";    // "ns" or "vm"; a restore keeps its origin's
  // A fork's egress policy: its parent's copy of the profiles (egress_json), not the
  // profiles' current state. Empty: resolve `egress_profiles` now.
  std::string inherited_egress_json;
  int64_t received_mono_ns = 0;  // when the API got the request, for timings.create_ms
};

// Bounds on what one request may move, applied by the API before reaching the node.
inline constexpr size_t kMaxFileBytes = 100u << 20;

class Node {
 public:
  static Result<std::unique_ptr<Node>> Start(const NodeConfig& config, store::Store* store);
  ~Node();
  void Stop();

  // Sandboxes. Valid in every state but destroyed unless noted.
  Result<std::pair<store::SandboxRecord, store::OperationRecord>> Create(const CreateRequest& req);
  Result<store::SandboxRecord> Get(const std::string& team, const std::string& id);
  Result<std::vector<store::SandboxRecord>> List(const store::SandboxFilter& filter);
  Result<store::OperationRecord> Destroy(const std::string& team, const std::string& id);
  // Valid while running.
  Result<store::SandboxRecord> SetTimeout(const std::string& team, const std::string& id, int64_t timeout_s);
  Result<store::OperationRecord> GetOperation(const std::string& team, const std::string& id);
  Result<store::OperationRecord> WaitOperation(const std::string& team, const std::string& id, int64_t timeout_ms);

  // Lifecycle (node_lifecycle.cc). Pause: running -> paused; Resume: paused -> running or
  // suspended -> running (restored from the snapshot store); others answer conflict.
  // Suspend: running|paused -> suspended: snapshot, export, stop, free the node's resources.
  Result<store::OperationRecord> Suspend(const std::string& team, const std::string& id);
  Result<store::OperationRecord> Pause(const std::string& team, const std::string& id);
  Result<store::OperationRecord> Resume(const std::string& team, const std::string& id);
  // Snapshots: valid while running or paused. O(1): freeze, read-only btrfs snapshot, thaw.
  Result<store::SnapshotRecord> Snapshot(const std::string& team, const std::string& id, const std::string& label);
  Result<std::vector<store::SnapshotRecord>> ListSnapshots(const std::string& team, const std::string& id);
  Result<store::SnapshotRecord> GetSnapshot(const std::string& team, const std::string& snap_id);
  // Children keep their parent link; the deleted snapshot's files go.
  Status DeleteSnapshot(const std::string& team, const std::string& snap_id);
  // `count` new sandboxes from `snap_id` (empty: a snapshot taken now). Valid while running or
  // paused (the source), any time for an existing snapshot.
  Result<std::vector<std::pair<store::SandboxRecord, store::OperationRecord>>> Fork(const std::string& team,
                                                                                   const std::string& id,
                                                                                   const std::string& snap_id,
                                                                                   int count);
  // Returns the sandbox's files to `snap_id` in place; its processes are restarted (ns keeps
  // files, not memory). Valid while running or paused; the sandbox is running afterwards.
  Result<store::OperationRecord> Rollback(const std::string& team, const std::string& id, const std::string& snap_id);
  // Files added, changed and removed in snapshot `a` relative to snapshot `against`.
  Result<nlohmann::json> Diff(const std::string& team, const std::string& a, const std::string& against);

  // Processes. Valid while running.
  Result<std::shared_ptr<Process>> StartProcess(const std::string& team, const std::string& id, ProcessSpec spec);
  Result<std::shared_ptr<Process>> GetProcess(const std::string& team, const std::string& id,
                                              const std::string& pid);
  Result<std::vector<std::shared_ptr<Process>>> ListProcesses(const std::string& team, const std::string& id);
  Status WriteStdin(const std::string& team, const std::string& id, const std::string& pid, std::string_view data);
  Status SignalProcess(const std::string& team, const std::string& id, const std::string& pid, int sig);
  // A tty process's new window size (1..4096 each). Valid while running.
  Status ResizeProcess(const std::string& team, const std::string& id, const std::string& pid, int cols, int rows);
  // Watches a directory in the sandbox (and, `recursive`, everything below it) with the
  // guest's inotify; returns once the watch is in place. The caller takes changes from the
  // stream and must Close() it. Valid while running.
  Result<std::shared_ptr<DirWatchStream>> WatchDirectory(const std::string& team, const std::string& id,
                                                         const std::string& path, bool recursive);
  Result<std::vector<store::CommandRecord>> Commands(const std::string& team, const std::string& id);

  // Files, resolved inside the sandbox by its guest. Valid while running.
  Result<std::string> ReadFile(const std::string& team, const std::string& id, const std::string& path);
  // `owner` (user name or uid, "" = root) owns the file and the parents the write creates.
  Result<nlohmann::json> WriteFile(const std::string& team, const std::string& id, const std::string& path,
                                   int mode, std::string_view data, const std::string& owner = "");
  // list, stat, mkdir, move, delete: `request` is a protocol kFileOp object.
  Result<nlohmann::json> FileOp(const std::string& team, const std::string& id, const nlohmann::json& request);

  // Templates.
  Result<std::vector<storage::TemplateInfo>> ListTemplates();
  Result<storage::TemplateInfo> GetTemplate(const std::string& name);
  Result<storage::TemplateInfo> BuildTemplate(const std::string& name, const storage::ProgressFn& progress);
  Result<storage::TemplateInfo> ImportTemplate(const std::string& name, const std::string& source,
                                               const storage::ProgressFn& progress);

  // Credentials and egress profiles (node_credentials.cc). Secrets are write-only: no method
  // returns one.
  Result<nlohmann::json> PutCredential(const std::string& team, const std::string& name, const nlohmann::json& body);
  Result<nlohmann::json> GetCredential(const std::string& team, const std::string& name);
  Result<nlohmann::json> ListCredentials(const std::string& team);
  Status DeleteCredential(const std::string& team, const std::string& name);
  Result<nlohmann::json> PutEgressProfile(const std::string& team, const std::string& name, const nlohmann::json& body);
  Result<nlohmann::json> GetEgressProfile(const std::string& team, const std::string& name);
  Result<nlohmann::json> ListEgressProfiles(const std::string& team);
  Status DeleteEgressProfile(const std::string& team, const std::string& name);

  // One sample of what a running or paused sandbox uses now (node_metrics.cc): CPU use since
  // the previous sample (or boot) as a percentage of its cpu limit, memory, page cache and
  // disk, with their limits. E2B's getMetrics shape: timestamp, cpuUsedPct, cpuCount, memUsed,
  // memTotal, memCache, diskUsed, diskTotal.
  Result<nlohmann::json> Metrics(const std::string& team, const std::string& id);
  // The limits the kernel has enforced on a running or paused sandbox on this node
  // (node_metrics.cc), read from its cgroup counters and its root's disk quota:
  // [{"kind": "memory"|"pids"|"disk", "count": n|null, "message"}], [] when none was hit or
  // the sandbox is not live here. Never fails: a counter that cannot be read is left out.
  nlohmann::json LimitsHit(const store::SandboxRecord& rec);
  Result<std::vector<store::AuditEvent>> Audit(const store::AuditFilter& filter);
  // The names of the egress profiles a sandbox record carries (its egress_json holds the
  // profiles as they were at creation: immutable for the sandbox's life).
  static nlohmann::json EgressProfileNames(const std::string& egress_json);
  // Fleet: ends the live sandboxes whose record no longer puts them here, running, because
  // the fleet declared this node lost while it was alive (a partition, a long stall) and
  // failed them. Returns how many it ended. Called from the heartbeat.
  int EndDisowned();
  // The parent cgroup of the sandboxes of the node on `data_dir` ("space-" + 16 hex): one per
  // node, so several nodes on one host never reconcile away each other's sandboxes.
  static std::string CgroupName(const std::string& data_dir);
  // Its scratch dirs on tmpfs (HostRunDir()), named like its cgroup: the ns and vm runtimes'
  // per-sandbox dirs and the build jail's mount points. The node's own (cli/dev.cc).
  struct RunDirs {
    std::string ns, vm, build;
  };
  static RunDirs RunDirsOf(const std::string& data_dir);
  store::Store* store() { return store_; }
  std::string pool_kind() const { return pool_->kind(); }
  std::string cgroup_version() const { return runtime_->cgroup_version(); }
  // Whether this node can run `vm` sandboxes (QEMU present, its runtime started).
  bool has_vm_runtime() const { return vm_runtime_ != nullptr; }
  size_t live_count();
  // Warm pool state as Prometheus text (size, target, hits, misses per template); "" when no
  // pool is configured.
  std::string WarmPoolMetrics();

 private:
  struct Live;
  struct WarmSandbox;

  Node(const NodeConfig& config, store::Store* store);
  Status Reconcile();
  Status RunCreate(store::SandboxRecord rec, CreateRequest req);  // cold: clone a root, boot
  // Starts the runtime over an existing root; fills `timings` with steps. With `pooled`, the
  // booted sandbox goes there instead of into live_ (a warm-pool sandbox), and a failure
  // leaves nothing running.
  Status Boot(store::SandboxRecord* rec, nlohmann::json* steps, std::shared_ptr<Live>* pooled = nullptr);
  // Warm pools (node_warm.cc).
  void StartWarmPools();
  void StopWarmPools();
  void WarmLoop();
  // Creates one pooled sandbox of `template_name`.
  Result<std::shared_ptr<WarmSandbox>> MakeWarm(const std::string& template_name);
  // A pooled sandbox for `req`, or null (counted as a miss when the template has a pool).
  std::shared_ptr<WarmSandbox> TakeWarm(const CreateRequest& req);
  // Gives a pooled sandbox to `rec`: limits, disk, environment, timeouts, egress.
  Status HandOutWarm(store::SandboxRecord* rec, const CreateRequest& req, const std::shared_ptr<WarmSandbox>& warm,
                     nlohmann::json* steps);
  // A create served from the pool, done in the request thread (the hand-out is a few cgroup
  // and table writes: the operation queue's thread hop and store writes would cost more):
  // the sandbox recorded running, its audit event and an operation already succeeded.
  // nullopt when the hand-out failed: the pooled sandbox is gone (*warm is reset) and the
  // caller creates the same id cold. An error is a store failure after the hand-out; the
  // sandbox is torn down.
  Result<std::optional<std::pair<store::SandboxRecord, store::OperationRecord>>> CreateFromWarm(
      store::SandboxRecord* rec, const CreateRequest& req, std::shared_ptr<WarmSandbox>* warm);
  // Ends a pooled sandbox entirely: runtime, root, uid slot.
  void DestroyWarm(const std::shared_ptr<WarmSandbox>& warm);
  Status RunDestroy(const std::string& id, const std::string& reason);
  void TeardownLive(const std::string& id);
  Result<std::shared_ptr<Live>> RunningLive(const std::string& team, const std::string& id);
  void RecordCommand(const std::string& sandbox, const Process& p);
  void Audit(const std::string& team, const std::string& sandbox, const std::string& kind,
             const std::string& action, nlohmann::json detail);
  void TimeoutLoop();
  // Fails the live sandboxes whose guest channel ended on its own (spaced died or broke the
  // protocol), with the reason in their record, and tears them down. From TimeoutLoop.
  void FailLostGuests();
  Status RunSnapshot(const std::string& id, store::SnapshotRecord* snap);
  // Snapshot store (node_store.cc).
  void QueueExport(const std::string& team, const std::string& snap_id);
  Status RunExport(const std::string& snap_id);
  // Uid slots for the tree jail (node/tree_jail.h): snapshot diffs and exports read there.
  TreeJailConfig TreeJail();
  Status RunGc();
  // Makes sure snapshots/<snap_id> exists locally, restoring it from the store if needed.
  Status EnsureLocalSnapshot(const std::string& snap_id);
  Status RunSuspend(const std::string& id);
  Status RunResumeFromStore(const std::string& id);
  Status ReconcileSnapshots();
  void RollSnapshots(int64_t now_ms);
  // Gives a new sandbox a placeholder per requested credential (in `env` under the
  // credential's env name) after checking existence, expiry and scope.
  Status AttachCredentials(const CreateRequest& req, const std::string& sandbox_id,
                           std::map<std::string, std::string>* env);
  Status RunRollback(const std::string& id, const std::string& snap_id);
  // Egress (node_egress.cc): the gateway, the firewall and each sandbox's veth.
  Status StartEgress();
  void StopEgress();
  // The profiles named at create, copied from the store: JSON for the record's egress_json.
  Result<std::string> SnapshotEgressProfiles(const std::string& team, const std::vector<std::string>& names);
  static bool HasEgress(const store::SandboxRecord& rec);
  // Joins a booted sandbox to the gateway: veth, registration, resolver and CA trust.
  // `steps`, when given, gets the root broker's share (egress.net_attach, ms).
  Status AttachEgress(const store::SandboxRecord& rec, Live* live, pid_t init_pid, nlohmann::json* steps = nullptr);
  void DetachEgress(Live* live);
  void ReconcileEgress();
  // File transfer with a booted sandbox's guest, whatever its state (node_exec.cc).
  Result<std::string> LiveReadFile(Live* live, const std::string& path);
  Result<nlohmann::json> LiveWriteFile(Live* live, const std::string& path, int mode, std::string_view data,
                                       const std::string& owner = "");
  Status SetState(const std::string& id, const std::string& state);
  // The runtime a sandbox runs on: its record's `runtime` (ns when unknown).
  runtime::Runtime* RuntimeOf(const std::string& id);
  runtime::Runtime* RuntimeNamed(const std::string& name) {
    return name == "vm" && vm_runtime_ ? vm_runtime_.get() : runtime_.get();
  }
  // A full checkpoint of a vm sandbox into snapshot `snap_id` (node_vm.cc): memory and
  // device state beside its disk image, then the pool's snapshot of both.
  Status SnapshotVm(const store::SandboxRecord& rec, const std::string& snap_id);
  Result<store::SandboxRecord> InState(const std::string& team, const std::string& id,
                                       std::initializer_list<const char*> states, const std::string& action);

  const NodeConfig config_;
  store::Store* const store_;
  std::string run_dir_;  // the runtime's scratch dir on tmpfs
  std::unique_ptr<storage::Pool> pool_;
  std::unique_ptr<runtime::NsRuntime> runtime_;
  std::unique_ptr<runtime::Runtime> vm_runtime_;  // null when QEMU is missing
  UidSlotLease uid_slots_;
  std::unique_ptr<Operations> ops_;
  std::unique_ptr<snapshot::LocalBlobStore> blobs_;
  std::unique_ptr<credentials::Kek> kek_;
  int64_t net_slot_ = -1;  // the broker's network slot: firewall table and link prefix
  int64_t gateway_uid_slot_ = -1;  // a uid slot held for the gateway worker's uid
  std::unique_ptr<GatewayProcess> gateway_;  // the unprivileged gateway worker
  // The snapshot store's directory: exports and restores lock it shared, GC exclusive
  // (snapshot/store_lock.h), across every node sharing it.
  std::string blobs_dir_;

  std::mutex mu_;
  std::map<std::string, std::shared_ptr<Live>> live_;  // GUARDED_BY(mu_)
  std::set<std::string> destroying_;                   // GUARDED_BY(mu_)

  std::mutex warm_mu_;
  std::condition_variable warm_cv_;  // a pool shrank, a create finished, or stop
  std::map<std::string, WarmCounters> warm_counters_;                           // GUARDED_BY(warm_mu_)
  std::map<std::string, std::vector<std::shared_ptr<WarmSandbox>>> warm_ready_;  // GUARDED_BY(warm_mu_)
  bool warm_stopping_ = false;                                                  // GUARDED_BY(warm_mu_)
  int creates_in_flight_ = 0;  // cold and warm creates queued or running; GUARDED_BY(warm_mu_)
  // When a create, destroy or exec last started or ended: refills wait for a quiet moment.
  std::atomic<int64_t> last_activity_mono_ns_{0};
  std::thread warm_thread_;

  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;  // GUARDED_BY(stop_mu_)
  std::thread timeout_thread_;
};

}  // namespace space::node
