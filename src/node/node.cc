// Node: builds the parts in dependency order, reconciles after a crash, runs the tick, and
// stops everything in the reverse order.
#include "node/node.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "broker/broker_cgroup_acts.h"
#include "common/clock.h"
#include "common/host_slots.h"
#include "common/log.h"
#include "common/syscall.h"
#include "node/build_jail.h"
#include "node/template_start.h"
#include "node/tree_jail.h"
#include "runtime/vm/vm_runtime.h"
#include "snapshot/local_blob_store.h"

namespace space::node {
namespace {

// FNV-1a of `s`: a stable short name for a data dir.
std::string Fnv1aHex(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

// The uid slots the jails prefer (any free one when taken): clear of sandboxes' low slots,
// the gateway workers' (kMaxSlots-1-net_slot) and the API front's (kMaxSlots-201).
constexpr int64_t kBuildUidSlot = HostSlots::kMaxSlots - 202;
constexpr int64_t kTreeJailUidSlot = HostSlots::kMaxSlots - 203;

}  // namespace

Node::Node(const NodeConfig& config, store::Store* store)
    : config_(config),
      store_(store),
      uid_slots_(config.uid_lock_dir.empty() ? HostRunDir() + "/uid-slots" : config.uid_lock_dir, config.broker) {}

Node::~Node() { Stop(); }

std::string Node::ObjectStoreMetrics() const {
  if (s3_ == nullptr) return "";
  const snapshot::S3Stats st = s3_->stats();
  std::string out;
  auto counter = [&](const char* name, const char* help, uint64_t v) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " counter\n" + name + " " +
           std::to_string(v) + "\n";
  };
  counter("space_object_store_requests_total", "HTTP requests sent to the object store (retries included).",
          st.requests);
  counter("space_object_store_retries_total", "Requests sent again after a transport error, 429 or 5xx.", st.retries);
  counter("space_object_store_failures_total", "Requests that failed after every attempt.", st.failures);
  counter("space_object_store_sent_bytes_total", "Request body bytes sent to the object store.", st.bytes_sent);
  counter("space_object_store_received_bytes_total", "Response body bytes received from the object store.",
          st.bytes_received);
  return out;
}

std::string Node::CgroupName(const std::string& data_dir) { return "space-" + Fnv1aHex(data_dir); }

Node::RunDirs Node::RunDirsOf(const std::string& data_dir) {
  const std::string h = Fnv1aHex(data_dir);
  return {.ns = HostRunDir() + "/run-" + h, .vm = HostRunDir() + "/vm-" + h, .build = HostRunDir() + "/jail-" + h};
}

Result<std::unique_ptr<Node>> Node::Start(const NodeConfig& config, store::Store* store) {
  std::unique_ptr<Node> node(new Node(config, store));
  Node* n = node.get();
  RETURN_IF_ERROR(MakeDirs(config.data_dir, 0700));
  if (::access(config.guest_binary.c_str(), X_OK) != 0) {
    return ErrnoStatus("access", "guest binary " + config.guest_binary, errno);
  }
  const RunDirs run_dirs = RunDirsOf(config.data_dir);

  // The jails: every step that writes a new template (debootstrap and the packages' scripts,
  // an import's tar, the busybox layout, a vm disk image) runs in the build jail, and every
  // walk of a tree of other owners in the tree jail, each as root of a user namespace on a uid
  // slot leased per step: never with the node's privileges.
  // What the node may not do itself its root broker does (common/privileged_acts.h); without
  // one (tests as root), the node acts itself.
  PrivilegedActs* const privileged = config.broker;
  TreeJailConfig tree_jail;
  tree_jail.privileged = privileged;
  tree_jail.acquire_slot = [n] { return n->uid_slots_.Acquire(kTreeJailUidSlot); };
  tree_jail.release_slot = [n](int64_t slot) { n->uid_slots_.Release(slot); };
  auto build_runner = [n, privileged, build_dir = run_dirs.build](const std::string& dir, const storage::ToolRun& run,
                                                                  const storage::ProgressFn& on_line) {
    BuildJailConfig jail;
    jail.privileged = privileged;
    jail.acquire_slot = [n] { return n->uid_slots_.Acquire(kBuildUidSlot); };
    jail.release_slot = [n](int64_t slot) { n->uid_slots_.Release(slot); };
    jail.run_dir = build_dir;
    return RunInBuildJail(jail, dir, run, on_line);
  };

  // The pool.
  storage::PoolConfig pc;
  pc.data_dir = config.data_dir;
  pc.force_overlay = config.force_overlay;
  pc.import_root = config.import_root;
  // An import's source is the admin's, maybe root's alone: the broker opens it (inside the same
  // root), and the build jail reads a directory through a read-only idmapped clone of it.
  if (config.broker) {
    pc.import_opener = [b = config.broker](const std::string& source) { return b->OpenImportSource(source); };
  }
  pc.loop_image_bytes = config.loop_image_bytes;
  pc.privileged = privileged;
  pc.build_runner = build_runner;
  pc.digester = [tree_jail](const std::string& dir) { return DigestInTreeJail(tree_jail, dir); };
  if (config.pool_mount) {
    ASSIGN_OR_RETURN(node->pool_, storage::Pool::OpenMounted(pc, *config.pool_mount));
  } else {
    ASSIGN_OR_RETURN(node->pool_, storage::Pool::Open(pc));
  }

  // The runtimes.
  runtime::RuntimeConfig rc;
  // Scratch dirs live on tmpfs (mkdir on ext4 costs milliseconds on the create path); the name
  // is derived from the data dir so a restarted node finds its predecessor's leftovers.
  rc.run_dir = run_dirs.ns;
  // Each node owns one parent cgroup, named like its scratch dir: several nodes on one host
  // (tests, a fleet on one machine) must never reconcile away each other's sandboxes. With a
  // root broker, the broker writes the cgroups (it was started with the same name).
  rc.cgroup_name = CgroupName(config.data_dir);
  rc.privileged = privileged;
  if (config.broker) {
    rc.cgroup_acts = std::make_shared<broker::BrokerCgroupActs>(config.broker, broker::CgroupRuntime::kNs);
  }
  ASSIGN_OR_RETURN(std::unique_ptr<runtime::NsRuntime> ns, runtime::NsRuntime::Create(rc));
  std::unique_ptr<runtime::Runtime> vm;
  if (::access("/usr/bin/qemu-system-x86_64", X_OK) == 0) {
    // Its own scratch dir and parent cgroup, so each runtime reconciles only its own.
    runtime::RuntimeConfig vc = rc;
    vc.run_dir = run_dirs.vm;
    vc.cgroup_name = rc.cgroup_name + "-vm";
    if (config.broker) {
      vc.cgroup_acts = std::make_shared<broker::BrokerCgroupActs>(config.broker, broker::CgroupRuntime::kVm);
    }
    if (const char* cache = std::getenv("SPACE_VM_CACHE_DIR")) vc.vm_cache_dir = cache;
    vc.vm_accel = config.vm_accel;
    // A template's disk image is made in the build jail too: its tree holds files of other
    // owners, which the node may not read.
    vc.tree_runner = [build_runner](const std::string& tree, const runtime::TreeToolArgv& argv, int stdin_fd) {
      return build_runner(tree, {.argv = argv, .stdin_fd = stdin_fd}, [](const std::string&) {});
    };
    auto made = runtime::CreateVmRuntime(vc, config.data_dir + "/pool/vm-images");
    if (made.ok()) {
      vm = std::move(made).value();
    } else {
      LogWarn("node", "vm runtime unavailable: " + made.status().ToString());
    }
  }
  node->runtimes_ = std::make_unique<Runtimes>(std::move(ns), std::move(vm));

  // The stores, the key, the operation queue.
  node->ops_ = std::make_unique<Operations>(store, config.workers);
  if (!config.object_store.empty()) {
    ASSIGN_OR_RETURN(snapshot::S3Location where, snapshot::ParseS3Location(config.object_store));
    ASSIGN_OR_RETURN(std::unique_ptr<snapshot::S3BlobStore> s3,
                     snapshot::S3BlobStore::Open(where, config.object_store_keys));
    node->s3_ = s3.get();
    node->blobs_ = std::move(s3);
    ASSIGN_OR_RETURN(node->blob_locks_, LeaseBlobLocks(store, config.node_name));
    LogInfo("store", "snapshot store: " + where.ToString());
  } else {
    const std::string blobs_dir = config.store_dir.empty() ? config.data_dir + "/store" : config.store_dir;
    ASSIGN_OR_RETURN(node->blobs_, snapshot::LocalBlobStore::Open(blobs_dir));
    node->blob_locks_ = FlockBlobLocks(blobs_dir);
  }
  ASSIGN_OR_RETURN(
      credentials::Kek kek,
      credentials::LoadOrCreateKek(config.kek_path.empty() ? config.data_dir + "/credentials.kek" : config.kek_path,
                                   std::getenv("SPACE_KEK")));
  node->kek_ = std::make_unique<credentials::Kek>(std::move(kek));

  // The parts, each after what it borrows.
  node->audit_ = std::make_unique<AuditLog>(store);
  node->credentials_ = std::make_unique<CredentialService>(store, node->kek_.get(), node->audit_.get());
  if (config.egress) {
    Egress::Config ec{.data_dir = config.data_dir,
                      .upstream_dns = config.egress_upstream_dns,
                      .upstream_ca = config.egress_upstream_ca,
                      .upstream_ca_pem = config.egress_upstream_ca_pem};
    Egress::Deps ed{.broker = config.broker,
                    .credentials = node->credentials_.get(),
                    .audit = node->audit_.get(),
                    .uid_slots = &node->uid_slots_,
                    .live = &node->live_};
    ASSIGN_OR_RETURN(node->egress_, Egress::Start(ec, ed));
  }
  node->snapshots_ = std::make_unique<Snapshots>(Snapshots::Deps{.store = store,
                                                                 .pool = node->pool_.get(),
                                                                 .blobs = node->blobs_.get(),
                                                                 .locks = node->blob_locks_.get(),
                                                                 .ops = node->ops_.get(),
                                                                 .audit = node->audit_.get(),
                                                                 .runtimes = node->runtimes_.get(),
                                                                 .tree_jail = tree_jail,
                                                                 .template_record_key = config.template_record_key});
  node->volumes_ = std::make_unique<Volumes>(Volumes::Deps{.node_name = config.node_name,
                                                           .store = store,
                                                           .pool = node->pool_.get(),
                                                           .blobs = node->blobs_.get(),
                                                           .locks = node->blob_locks_.get(),
                                                           .audit = node->audit_.get(),
                                                           .tree_jail = tree_jail,
                                                           .sync_on_destroy = !config.object_store.empty()});
  node->metrics_ = std::make_unique<SandboxMetrics>(store, &node->live_, node->pool_.get());
  node->templates_ =
      std::make_unique<Templates>(node->pool_.get(), config.share_templates ? node->snapshots_.get() : nullptr);
  node->lifecycle_ = std::make_unique<Lifecycle>(
      Lifecycle::Deps{.node_name = config.node_name,
                      .guest_binary = config.guest_binary,
                      .store = store,
                      .pool = node->pool_.get(),
                      .runtimes = node->runtimes_.get(),
                      .live = &node->live_,
                      .ops = node->ops_.get(),
                      .audit = node->audit_.get(),
                      .credentials = node->credentials_.get(),
                      .egress = node->egress_.get(),
                      .snapshots = node->snapshots_.get(),
                      .volumes = node->pool_->kind() == "btrfs" ? node->volumes_.get() : nullptr,
                      .uid_slots = &node->uid_slots_,
                      .privileged = privileged,
                      .pull_templates = config.share_templates},
      config.warm_pool);
  node->io_ = std::make_unique<SandboxIo>(store, &node->live_, node->audit_.get(),
                                          [lc = node->lifecycle_.get()] { lc->warm_pools().NoteActivity(); });
  node->lifecycle_->set_template_starter(
      [io = node->io_.get()](const store::Sandbox& rec, const TemplateConfig& config, nlohmann::json* steps) {
        return StartTemplateCommands(io, rec, config, steps);
      });
  node->ports_ = std::make_unique<Ports>(store, &node->live_, node->audit_.get(), node->lifecycle_.get(), config.ports);
  node->template_builds_ = std::make_unique<TemplateBuilds>(
      TemplateBuilds::Deps{.pool = node->pool_.get(),
                           .lifecycle = node->lifecycle_.get(),
                           .io = node->io_.get(),
                           .ops = node->ops_.get(),
                           .store = store,
                           .publish = config.share_templates ? node->snapshots_.get() : nullptr});

  // Volumes first: their leftover views go before the sandboxes that mount them boot again.
  if (node->pool_->kind() == "btrfs") RETURN_IF_ERROR(node->volumes_->Reconcile());
  RETURN_IF_ERROR(node->lifecycle_->Reconcile());
  if (node->egress_) node->egress_->Reconcile();
  RETURN_IF_ERROR(node->snapshots_->Reconcile());
  node->tick_thread_ = std::thread([n] { n->TickLoop(); });
  node->lifecycle_->StartWarmPools();
  LogInfo("node", "ready: pool " + node->pool_->kind() + ", cgroup " + node->runtimes_->ns()->cgroup_version());
  return node;
}

void Node::TickLoop() {
  for (int tick = 0;; ++tick) {
    {
      std::unique_lock<std::mutex> lock(stop_mu_);
      if (stop_cv_.wait_for(lock, std::chrono::milliseconds(250), [&] { return stopping_; })) return;
    }
    if (tick % 4 == 0) pool_->CheckDiskAccounting();
    const int64_t now = WallNowMs();
    snapshots_->Roll(now, live_.All());
    lifecycle_->Tick(now);
  }
}

void Node::Stop() {
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  stop_cv_.notify_all();
  // Pooled sandboxes belong to nobody: they go entirely (runtime, root, uid slot).
  if (lifecycle_) lifecycle_->StopWarmPools();
  if (tick_thread_.joinable()) tick_thread_.join();
  if (ops_) ops_->Stop();
  // Sandboxes keep running state in the store; closing their channels ends them, and the
  // next start boots them again (Reconcile).
  if (lifecycle_) lifecycle_->ShutdownLive();
  if (egress_) egress_->Stop();
  if (!runtimes_) return;
  for (runtime::Runtime* rt : {static_cast<runtime::Runtime*>(runtimes_->ns()), runtimes_->vm()}) {
    if (rt == nullptr) continue;
    if (Status st = rt->Close(); !st.ok()) LogWarn("node", st.ToString());
  }
  // The per-data-dir scratch dirs go once empty (a restart makes them again).
  const RunDirs run_dirs = RunDirsOf(config_.data_dir);
  ::rmdir(run_dirs.ns.c_str());
  if (runtimes_->vm()) ::rmdir(run_dirs.vm.c_str());
}

}  // namespace space::node
