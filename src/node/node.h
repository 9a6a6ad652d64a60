// Node: runs sandboxes on this machine. It is the composition of parts with one job each,
// which it builds in Start and hands to the API and E2B layers:
//
//   lifecycle()    create, boot, pause/resume, suspend, fork, rollback, destroy, timeouts
//   io()           processes and files, through each sandbox's guest
//   snapshots()    snapshots, their export to and restore from the snapshot store, diffs
//   credentials()  credentials (sealed secrets) and egress profiles
//   metrics()      resource samples and the limits the kernel enforced
//   templates()    the root filesystems sandboxes are cloned from
//   ports()        preview ports: URLs that reach a port inside a sandbox
//   audit()        who did what to which sandbox
//
// and what they share: the store, the pool, the runtimes, the table of live sandboxes, the
// operation queue, the egress gateway. docs/architecture.md shows the data flow.
//
// Owned by `space dev` / `space node`. Thread-safe: every part may be called from any HTTP
// thread.
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "broker/broker_client.h"
#include "credentials/kek.h"
#include "node/audit_log.h"
#include "node/blob_locks.h"
#include "node/create_request.h"
#include "node/credential_service.h"
#include "node/egress.h"
#include "node/lifecycle.h"
#include "node/live_sandboxes.h"
#include "node/operations.h"
#include "node/ports.h"
#include "node/runtimes.h"
#include "node/sandbox_io.h"
#include "node/sandbox_metrics.h"
#include "node/snapshots.h"
#include "node/template_builds.h"
#include "node/templates.h"
#include "node/uid_slot_lease.h"
#include "node/volumes.h"
#include "snapshot/blob_store.h"
#include "snapshot/s3_blob_store.h"
#include "storage/pool.h"
#include "store/store.h"

namespace space::node {

struct NodeConfig {
  std::string data_dir;      // pool, run dir, api key
  std::string guest_binary;  // static spaced
  std::string node_name = "local";
  std::string uid_lock_dir;  // default: <host run dir>/uid-slots (host-wide, tmpfs)
  std::string store_dir;     // snapshot store; default <data_dir>/store
  // The snapshot store in an S3 bucket instead (snapshot/s3_location.h), signed in with these
  // keys; the store database then holds the locks (node/blob_locks.h).
  std::string object_store;
  snapshot::S3Credentials object_store_keys;
  // A fleet's node: built templates are published to the store and pulled by the nodes that
  // lack them (templates on every node).
  bool share_templates = false;
  // The fleet token: published template records carry its MAC, and a record without a valid
  // one is refused (only the fleet's own nodes record builds).
  std::string template_record_key;
  // Key-encryption key for credential secrets, outside the database; SPACE_KEK (64 hex
  // characters) overrides. Default <data_dir>/credentials.kek (mode 0600).
  std::string kek_path;
  int workers = 4;
  bool force_overlay = false;
  std::string import_root = "/";  // template imports read only below one of these roots (':'-joined; storage/pool.h)
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
  // The root broker (broker/broker.h), which does the privileged acts the node gave up;
  // needed for egress. Not owned.
  broker::BrokerClient* broker = nullptr;
  // Warm pools (node/warm_pools.h): template -> sandboxes kept pre-created to hand out on
  // create. Empty: every create is cold.
  std::map<std::string, int> warm_pool;
  // vm runtime accelerator: "auto", "kvm" or "tcg" (runtime/vm/kvm_probe.h).
  std::string vm_accel = "auto";
  // Preview ports (node/ports.h): the domain and limits; the listen port is set once bound.
  PortsConfig ports;
};

class Node {
 public:
  static Result<std::unique_ptr<Node>> Start(const NodeConfig& config, store::Store* store);
  ~Node();
  void Stop();

  Lifecycle& lifecycle() { return *lifecycle_; }
  SandboxIo& io() { return *io_; }
  Snapshots& snapshots() { return *snapshots_; }
  Volumes& volumes() { return *volumes_; }
  CredentialService& credentials() { return *credentials_; }
  SandboxMetrics& metrics() { return *metrics_; }
  Templates& templates() { return *templates_; }
  TemplateBuilds& template_builds() { return *template_builds_; }
  AuditLog& audit() { return *audit_; }
  Ports& ports() { return *ports_; }

  store::Store* store() { return store_; }
  std::string pool_kind() const { return pool_->kind(); }
  std::string cgroup_version() const { return runtimes_->ns()->cgroup_version(); }
  bool has_vm_runtime() const { return runtimes_->vm() != nullptr; }  // QEMU present, its runtime up
  // "kvm", "tcg" or "kvm-unproven" (runtime.h accelerator); "" without a vm runtime.
  std::string vm_accelerator() const { return runtimes_->vm() ? runtimes_->vm()->accelerator() : ""; }
  size_t live_count() const { return live_.size(); }
  // Warm pools as Prometheus text (size, target, hits, misses per template); "" without pools.
  std::string WarmPoolMetrics() { return lifecycle_->warm_pools().MetricsText(); }
  // Requests and bytes to the object store, as Prometheus text ("" with a local store).
  std::string ObjectStoreMetrics() const;

  // The parent cgroup of the sandboxes of the node on `data_dir` ("space-" + 16 hex): one per
  // node, so several nodes on one host never reconcile away each other's sandboxes.
  static std::string CgroupName(const std::string& data_dir);
  // Its scratch dirs on tmpfs (HostRunDir()), named like its cgroup: the ns and vm runtimes'
  // per-sandbox dirs and the build jail's mount points.
  struct RunDirs {
    std::string ns, vm, build;
  };
  static RunDirs RunDirsOf(const std::string& data_dir);

 private:
  Node(const NodeConfig& config, store::Store* store);
  // Every 250 ms until Stop: disk accounting, rolling snapshots, lost guests, timeouts.
  void TickLoop();

  const NodeConfig config_;
  store::Store* const store_;
  std::unique_ptr<storage::Pool> pool_;
  std::unique_ptr<Runtimes> runtimes_;
  UidSlotLease uid_slots_;
  LiveSandboxes live_;
  std::unique_ptr<Operations> ops_;
  std::unique_ptr<snapshot::BlobStore> blobs_;
  snapshot::S3BlobStore* s3_ = nullptr;  // blobs_ when it is an object store (its counters)
  std::unique_ptr<BlobLocks> blob_locks_;
  std::unique_ptr<credentials::Kek> kek_;
  std::unique_ptr<AuditLog> audit_;
  std::unique_ptr<CredentialService> credentials_;
  std::unique_ptr<Egress> egress_;  // null when egress is off
  std::unique_ptr<Snapshots> snapshots_;
  std::unique_ptr<Volumes> volumes_;
  std::unique_ptr<SandboxIo> io_;
  std::unique_ptr<SandboxMetrics> metrics_;
  std::unique_ptr<Templates> templates_;
  std::unique_ptr<Lifecycle> lifecycle_;
  std::unique_ptr<TemplateBuilds> template_builds_;
  std::unique_ptr<Ports> ports_;

  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;  // GUARDED_BY(stop_mu_)
  std::thread tick_thread_;
};

}  // namespace space::node
