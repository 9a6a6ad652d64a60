// Sandbox lifecycle: create, boot, destroy, timeouts and crash reconciliation.
#include "node/node.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "broker/broker_cgroup_acts.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/nice.h"
#include "common/random.h"
#include "common/syscall.h"
#include "node/build_jail.h"
#include "node/live.h"
#include "runtime/vm/vm_runtime.h"

namespace space::node {
namespace {

constexpr int kHelloTimeoutMs = 10000;
// A microVM boots a kernel first; under TCG emulation that takes seconds.
constexpr int kVmHelloTimeoutMs = 90000;

std::string Hostname(const std::string& id) {
  std::string h = id;
  for (char& c : h) {
    if (c == '_') c = '-';
  }
  return h.substr(0, 63);
}

// FNV-1a of `s`: a stable short name for a data dir.
std::string Fnv1aHex(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

bool IsBuiltinTemplate(const std::string& name) { return name == "base" || name == "busybox"; }

// The uid slot a template build prefers (any free one when taken): clear of sandboxes' low
// slots, the gateway workers' (kMaxSlots-1-net_slot) and the API front's (kMaxSlots-201).
constexpr int64_t kBuildUidSlot = HostSlots::kMaxSlots - 202;

}  // namespace

Node::Node(const NodeConfig& config, store::Store* store)
    : config_(config),
      store_(store),
      uid_slots_(config.uid_lock_dir.empty() ? HostRunDir() + "/uid-slots" : config.uid_lock_dir, config.broker) {}

Result<std::unique_ptr<Node>> Node::Start(const NodeConfig& config, store::Store* store) {
  std::unique_ptr<Node> node(new Node(config, store));
  RETURN_IF_ERROR(MakeDirs(config.data_dir, 0700));
  if (::access(config.guest_binary.c_str(), X_OK) != 0) {
    return ErrnoStatus("access", "guest binary " + config.guest_binary, errno);
  }
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
  // Every step that writes a new template (debootstrap and the packages' scripts, an import's
  // tar, the busybox layout) runs in the build jail, as root of a user namespace on a uid
  // slot leased per step: never with the node's privileges.
  pc.build_runner = [n = node.get(), build_dir = RunDirsOf(config.data_dir).build](const std::string& dir, const storage::ToolRun& run,
                                     const storage::ProgressFn& on_line) {
    BuildJailConfig jail;
    jail.acquire_slot = [n] { return n->uid_slots_.Acquire(kBuildUidSlot); };
    jail.release_slot = [n](int64_t slot) { n->uid_slots_.Release(slot); };
    jail.run_dir = build_dir;
    return RunInBuildJail(jail, dir, run, on_line);
  };
  // And their digests are read in the tree jail: a template holds files of other owners.
  pc.digester = [n = node.get()](const std::string& dir) { return DigestInTreeJail(n->TreeJail(), dir); };
  if (config.pool_mount) {
    ASSIGN_OR_RETURN(node->pool_, storage::Pool::OpenMounted(pc, *config.pool_mount));
  } else {
    ASSIGN_OR_RETURN(node->pool_, storage::Pool::Open(pc));
  }
  runtime::RuntimeConfig rc;
  // Scratch dirs live on tmpfs (mkdir on ext4 costs milliseconds on the create path); the name
  // is derived from the data dir so a restarted node finds its predecessor's leftovers.
  rc.run_dir = RunDirsOf(config.data_dir).ns;
  // Each node owns one parent cgroup, named like its scratch dir: several nodes on one host
  // (tests, a fleet on one machine) must never reconcile away each other's sandboxes. With a
  // root broker, the broker writes the cgroups (it was started with the same name).
  rc.cgroup_name = CgroupName(config.data_dir);
  if (config.broker) {
    rc.cgroup_acts = std::make_shared<broker::BrokerCgroupActs>(config.broker, broker::CgroupRuntime::kNs);
  }
  node->run_dir_ = rc.run_dir;
  ASSIGN_OR_RETURN(node->runtime_, runtime::NsRuntime::Create(rc));
  if (::access("/usr/bin/qemu-system-x86_64", X_OK) == 0) {
    // Its own scratch dir and parent cgroup, so each runtime reconciles only its own.
    runtime::RuntimeConfig vc = rc;
    vc.run_dir = RunDirsOf(config.data_dir).vm;
    vc.cgroup_name = rc.cgroup_name + "-vm";
    if (config.broker) {
      vc.cgroup_acts = std::make_shared<broker::BrokerCgroupActs>(config.broker, broker::CgroupRuntime::kVm);
    }
    if (const char* cache = std::getenv("SPACE_VM_CACHE_DIR")) vc.vm_cache_dir = cache;
    // A template's disk image is made in the build jail too: its tree holds files of other
    // owners, which the node may not read.
    vc.tree_runner = [runner = pc.build_runner](const std::string& tree, const runtime::TreeToolArgv& argv,
                                                int stdin_fd) {
      return runner(tree, {.argv = argv, .stdin_fd = stdin_fd}, [](const std::string&) {});
    };
    auto vm = runtime::CreateVmRuntime(vc, config.data_dir + "/pool/vm-images");
    if (vm.ok()) {
      node->vm_runtime_ = std::move(vm).value();
    } else {
      LogWarn("node", "vm runtime unavailable: " + vm.status().ToString());
    }
  }
  node->ops_ = std::make_unique<Operations>(store, config.workers);
  node->blobs_dir_ = config.store_dir.empty() ? config.data_dir + "/store" : config.store_dir;
  ASSIGN_OR_RETURN(node->blobs_, snapshot::LocalBlobStore::Open(node->blobs_dir_));
  ASSIGN_OR_RETURN(credentials::Kek kek,
                   credentials::LoadOrCreateKek(config.kek_path.empty() ? config.data_dir + "/credentials.kek"
                                                                        : config.kek_path,
                                                std::getenv("SPACE_KEK")));
  node->kek_ = std::make_unique<credentials::Kek>(std::move(kek));
  if (config.egress) RETURN_IF_ERROR(node->StartEgress());
  RETURN_IF_ERROR(node->Reconcile());
  if (config.egress) node->ReconcileEgress();
  RETURN_IF_ERROR(node->ReconcileSnapshots());
  node->timeout_thread_ = std::thread([n = node.get()] { n->TimeoutLoop(); });
  node->StartWarmPools();
  LogInfo("node", "ready: pool " + node->pool_->kind() + ", cgroup " + node->runtime_->cgroup_version());
  return node;
}

Node::~Node() { Stop(); }

std::string Node::CgroupName(const std::string& data_dir) { return "space-" + Fnv1aHex(data_dir); }

Node::RunDirs Node::RunDirsOf(const std::string& data_dir) {
  const std::string h = Fnv1aHex(data_dir);
  return {.ns = HostRunDir() + "/run-" + h, .vm = HostRunDir() + "/vm-" + h, .build = HostRunDir() + "/jail-" + h};
}

void Node::Stop() {
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  stop_cv_.notify_all();
  // Pooled sandboxes belong to nobody: they go entirely (runtime, root, uid slot).
  StopWarmPools();
  if (timeout_thread_.joinable()) timeout_thread_.join();
  if (ops_) ops_->Stop();
  // Sandboxes keep running state in the store; closing their channels ends them, and the
  // next start boots them again (Reconcile).
  std::map<std::string, std::shared_ptr<Live>> live;
  {
    std::lock_guard<std::mutex> lock(mu_);
    live.swap(live_);
  }
  for (auto& [id, l] : live) {
    l->guest->Shutdown();
    DetachEgress(l.get());
    if (Status st = l->runtime->Destroy(id); !st.ok()) LogWarn("node", st.ToString());
  }
  StopEgress();
  for (runtime::Runtime* rt : {static_cast<runtime::Runtime*>(runtime_.get()), vm_runtime_.get()}) {
    if (rt == nullptr) continue;
    if (Status st = rt->Close(); !st.ok()) LogWarn("node", st.ToString());
  }
  // The per-data-dir scratch dirs go once empty (a restart makes them again).
  if (!run_dir_.empty()) ::rmdir(run_dir_.c_str());
  if (vm_runtime_) ::rmdir((HostRunDir() + "/vm-" + Fnv1aHex(config_.data_dir)).c_str());
}

size_t Node::live_count() {
  std::lock_guard<std::mutex> lock(mu_);
  return live_.size();
}

void Node::Audit(const std::string& team, const std::string& sandbox, const std::string& kind,
                 const std::string& action, nlohmann::json detail) {
  store::AuditEvent e;
  e.ts_ms = WallNowMs();
  e.team = team;
  e.sandbox = sandbox;
  e.kind = kind;
  e.action = action;
  e.detail_json = detail.dump();
  if (Status st = store_->AppendAudit(e); !st.ok()) LogError("audit", st.ToString());
}

Result<std::pair<store::SandboxRecord, store::OperationRecord>> Node::Create(const CreateRequest& in) {
  CreateRequest req = in;
  std::string template_digest;
  std::string current_digest;  // of an imported template, to spot pooled sandboxes made before a re-import
  if (!req.from_snapshot.empty()) {
    // A restore keeps the template lineage of the sandbox the snapshot was taken of.
    ASSIGN_OR_RETURN(store::SnapshotRecord snap, GetSnapshot(req.team, req.from_snapshot));
    ASSIGN_OR_RETURN(store::SandboxRecord origin, store_->GetSandbox(snap.sandbox));
    req.template_name = origin.template_name;
    template_digest = origin.template_digest;
  } else if (!IsBuiltinTemplate(req.template_name)) {
    // Imported templates must exist now; built-ins are built on first use.
    ASSIGN_OR_RETURN(storage::TemplateInfo tmpl, pool_->GetTemplate(req.template_name));
    current_digest = tmpl.digest;
  }
  // Checked before a pooled sandbox is taken, so a refused request costs the pool nothing.
  std::string egress_json;
  if (!req.inherited_egress_json.empty()) {
    egress_json = req.inherited_egress_json;
  } else {
    ASSIGN_OR_RETURN(egress_json, SnapshotEgressProfiles(req.team, req.egress_profiles));
  }
  // A pooled sandbox brings its id (its hostname, root and cgroup were made for it): the id
  // was random and unseen until now, so the sandbox is as new to the user as a cold one.
  if (!req.from_snapshot.empty()) {
    ASSIGN_OR_RETURN(store::SnapshotRecord snap, GetSnapshot(req.team, req.from_snapshot));
    ASSIGN_OR_RETURN(store::SandboxRecord origin, store_->GetSandbox(snap.sandbox));
    req.runtime = origin.runtime.empty() ? "ns" : origin.runtime;
    auto resources = nlohmann::json::parse(origin.resources_json, nullptr, false);
    if (req.runtime == "vm" && resources.is_object()) {
      // A full checkpoint restores into the machine it was taken of: same RAM, same vCPUs.
      req.memory_mb = resources.value("memory_mb", req.memory_mb);
      req.cpus = resources.value("cpus", req.cpus);
    }
  }
  if (req.runtime == "vm" && !vm_runtime_) {
    return Unavailable("runtime 'vm' is not available on this node (qemu-system-x86 missing?)");
  }
  if (req.runtime == "vm" && !req.egress_profiles.empty()) {
    // The VMM has no network device yet: nothing would carry the egress the profiles allow.
    return InvalidArgument("runtime 'vm' has no network yet: egress profiles need runtime 'ns'");
  }
  // Warm pools hold ns sandboxes only.
  std::shared_ptr<WarmSandbox> warm = req.runtime == "ns" ? TakeWarm(req) : nullptr;
  if (warm && !current_digest.empty() && warm->template_digest != current_digest) {
    DestroyWarm(warm);
    warm.reset();
  }
  // Refused before it was handed out: the pooled sandbox goes (never back to the pool, since
  // rows may already name its id).
  struct DiscardUnlessSubmitted {
    Node* node;
    std::shared_ptr<WarmSandbox>* warm;
    ~DiscardUnlessSubmitted() {
      if (*warm) node->DestroyWarm(*warm);
    }
  } discard_warm{this, &warm};
  store::SandboxRecord rec;
  rec.id = warm ? warm->live->id : NewId("sbx");
  rec.team = req.team;
  rec.state = "creating";
  rec.template_name = req.template_name;
  rec.template_digest = template_digest;
  rec.head_snapshot = req.from_snapshot;
  rec.runtime = req.runtime;
  rec.node = config_.node_name;
  rec.created_at_ms = WallNowMs();
  rec.timeout_s = req.timeout_s;
  rec.expires_at_ms = rec.created_at_ms + req.timeout_s * 1000;
  rec.on_timeout = req.on_timeout;
  rec.metadata_json = nlohmann::json(req.metadata).dump();
  rec.egress_json = std::move(egress_json);
  std::map<std::string, std::string> env = req.env;
  RETURN_IF_ERROR(AttachCredentials(req, rec.id, &env));
  rec.env_json = nlohmann::json(env).dump();
  rec.resources_json =
      nlohmann::json{{"cpus", req.cpus}, {"memory_mb", req.memory_mb}, {"disk_mb", req.disk_mb}}.dump();
  rec.policy_json = req.snapshot_policy.dump();
  if (warm) {
    ASSIGN_OR_RETURN(auto served, CreateFromWarm(&rec, req, &warm));
    if (served) return std::move(*served);
  }
  RETURN_IF_ERROR(store_->PutSandbox(rec));
  Audit(req.team, rec.id, "lifecycle", "create", {{"template", req.template_name}});
  {
    std::lock_guard<std::mutex> lock(warm_mu_);
    ++creates_in_flight_;  // the refill thread yields to it
  }
  last_activity_mono_ns_ = MonoNowNs();
  auto op = ops_->Submit(req.team, "create", rec.id, [this, rec, req] { return RunCreate(rec, req); });
  if (!op.ok()) {
    std::lock_guard<std::mutex> lock(warm_mu_);
    --creates_in_flight_;
    return op.status();
  }
  return std::make_pair(rec, *op);
}

Status Node::RunCreate(store::SandboxRecord rec, CreateRequest req) {
  struct CreateDone {
    Node* node;
    ~CreateDone() {
      {
        std::lock_guard<std::mutex> lock(node->warm_mu_);
        --node->creates_in_flight_;
      }
      node->last_activity_mono_ns_ = MonoNowNs();
      node->warm_cv_.notify_all();
    }
  } done{this};
  nlohmann::json steps = nlohmann::json::object();
  auto step_start = MonoNowNs();
  auto mark = [&](const char* name) {
    int64_t now = MonoNowNs();
    steps[name] = static_cast<double>(now - step_start) / 1e6;
    step_start = now;
  };
  Status st = [&]() -> Status {
    uint64_t disk_limit = static_cast<uint64_t>(req.disk_mb) << 20;
    if (!req.from_snapshot.empty()) {
      RETURN_IF_ERROR(EnsureLocalSnapshot(req.from_snapshot));
      RETURN_IF_ERROR(pool_->CreateRootFromSnapshot(rec.id, req.from_snapshot, disk_limit).status());
      mark("clone_snapshot");
    } else {
      ASSIGN_OR_RETURN(storage::TemplateInfo tmpl, pool_->EnsureTemplate(req.template_name, [&](const std::string& l) {
                         LogInfo("template " + req.template_name, l);
                       }));
      rec.template_digest = tmpl.digest;
      mark("template");
      RETURN_IF_ERROR(pool_->CreateRoot(rec.id, tmpl.digest, disk_limit).status());
      mark("clone_root");
    }
    return Boot(&rec, &steps);
  }();
  if (!st.ok()) {
    TeardownLive(rec.id);
    if (Status d = pool_->DestroyRoot(rec.id); !d.ok()) LogWarn("node", d.ToString());
    rec.state = "failed";
    rec.error = st.message();
    rec.timings_json = nlohmann::json{{"steps", steps}}.dump();
    if (Status p = store_->PutSandbox(rec); !p.ok()) LogError("node", p.ToString());
    Audit(rec.team, rec.id, "lifecycle", "create_failed", {{"error", st.message()}});
    return st;
  }
  double create_ms = static_cast<double>(MonoNowNs() - (req.received_mono_ns ? req.received_mono_ns : step_start)) / 1e6;
  rec.timings_json = nlohmann::json{{"create_ms", create_ms}, {"steps", steps}}.dump();
  rec.state = "running";
  // A destroy may have been requested while we were booting: it wins.
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (destroying_.count(rec.id)) return Status::Ok();
  }
  return store_->PutSandbox(rec);
}

Status Node::Boot(store::SandboxRecord* rec, nlohmann::json* steps, std::shared_ptr<Live>* pooled) {
  auto t = MonoNowNs();
  ASSIGN_OR_RETURN(int64_t slot, uid_slots_.Acquire(rec->uid_slot));
  rec->uid_slot = slot;
  auto resources = nlohmann::json::parse(rec->resources_json, nullptr, false);
  auto env = nlohmann::json::parse(rec->env_json, nullptr, false);
  runtime::SandboxSpec spec;
  spec.id = rec->id;
  spec.rootfs = pool_->RootPath(rec->id);
  spec.hostname = Hostname(rec->id);
  spec.uid_base = HostSlots::UidBase(slot);
  spec.guest_binary = config_.guest_binary;
  if (resources.is_object()) {
    spec.limits.cpus = resources.value("cpus", 1.0);
    spec.limits.memory_bytes = static_cast<uint64_t>(resources.value("memory_mb", int64_t{512})) << 20;
  }
  spec.limits.pids_max = runtime::PidsMaxFor(spec.limits.memory_bytes);
  if (env.is_object()) {
    for (auto& [k, v] : env.items()) {
      if (v.is_string()) spec.guest_env.push_back(k + "=" + v.get<std::string>());
    }
  }
  spec.guest_env.push_back("SPACE_SANDBOX_ID=" + rec->id);
  runtime::Runtime* rt = RuntimeNamed(rec->runtime);
  const bool vm = rt == vm_runtime_.get();
  const std::string vm_state = spec.rootfs + "/" + runtime::kVmStateDir + "/" + runtime::kVmMemoryName;
  if (vm) {
    spec.template_digest = rec->template_digest;
    // A root restored from a full snapshot carries the memory it was taken with. Looked up
    // beneath the root without following symlinks: the root's contents are not trusted.
    ASSIGN_OR_RETURN(bool has_state, runtime::HasVmStateFile(spec.rootfs, runtime::kVmMemoryName));
    if (has_state) spec.restore_state = vm_state;
  }
  if (HasEgress(*rec)) {
    // The gateway's CA is added to the system bundle at boot; point the runtimes that keep
    // their own trust stores at it too.
    for (const auto& [k, v] : kEgressTrustEnv) spec.guest_env.push_back(std::string(k) + "=" + v);
  }
  (*steps)["uid_slot"] = static_cast<double>(MonoNowNs() - t) / 1e6;
  auto launched = rt->Launch(spec);
  if (!launched.ok()) {
    uid_slots_.Release(slot);
    return launched.status();
  }
  const std::string step_prefix = vm ? "vm." : "ns.";
  for (const auto& [name, us] : launched->steps_us) (*steps)[step_prefix + name] = static_cast<double>(us) / 1e3;
  // Loaded into the VMM: the memory state lives on only in the snapshot it came from.
  if (!spec.restore_state.empty()) ::unlink(spec.restore_state.c_str());
  t = MonoNowNs();
  auto live = std::make_shared<Live>();
  live->id = rec->id;
  live->team = rec->team;
  live->uid_slot = slot;
  live->booted_mono_ns = MonoNowNs();
  live->expires_at_ms = rec->expires_at_ms;
  live->last_rolling_ms = WallNowMs();
  auto policy = nlohmann::json::parse(rec->policy_json, nullptr, false);
  if (policy.is_object()) live->rolling_every_ms = policy.value("every_s", int64_t{0}) * 1000;
  live->guest = std::make_unique<GuestClient>(std::move(launched->channel), rec->id);
  live->init_pid = launched->pid;
  live->runtime = rt;
  if (vm) {
    // spaced's environment in a VM is what the kernel gave init; the sandbox's own env is
    // added to every process instead (as for a warm-pool sandbox).
    for (const auto& kv : spec.guest_env) {
      auto eq = kv.find('=');
      std::string k = kv.substr(0, eq);
      if (k != "HOME" && k != "USER" && k != "LOGNAME" && k != "SHELL") live->base_env[k] = kv.substr(eq + 1);
    }
  }
  if (pooled != nullptr) {
    // The low-priority refill thread makes pooled sandboxes; what outlives the refill (spaced
    // and this channel's reader thread, which inherit the caller's nice value) must run at
    // normal priority, like a cold sandbox's. Lowering a nice value takes CAP_SYS_NICE: the
    // broker's (common/nice.h); a failure costs priority, not the sandbox.
    if (Status st = SetChildNice(launched->pidfd.get(), launched->pid, 0); !st.ok()) LogWarn("warm", st.ToString());
    const int nice_before = ::getpriority(PRIO_PROCESS, 0);
    if (nice_before != 0) {
      if (Status st = SetThreadNice(0); !st.ok()) LogWarn("warm", st.ToString());
    }
    Status started = live->guest->Start(kHelloTimeoutMs);
    if (nice_before != 0) (void)SetThreadNice(nice_before);  // a raise: needs nothing
    if (Status st = started; !st.ok()) {
      live->guest->Shutdown();
      if (Status d = runtime_->Destroy(rec->id); !d.ok()) LogWarn("warm", d.ToString());
      uid_slots_.Release(slot);
      return st;
    }
    (*steps)["guest_hello"] = static_cast<double>(MonoNowNs() - t) / 1e6;
    *pooled = std::move(live);
    return Status::Ok();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    live_[rec->id] = live;
  }
  if (launched->restored) {
    RETURN_IF_ERROR(live->guest->Resume(kVmHelloTimeoutMs));
    (*steps)["guest_resync"] = static_cast<double>(MonoNowNs() - t) / 1e6;
  } else {
    RETURN_IF_ERROR(live->guest->Start(vm ? kVmHelloTimeoutMs : kHelloTimeoutMs));
    (*steps)["guest_hello"] = static_cast<double>(MonoNowNs() - t) / 1e6;
  }
  if (HasEgress(*rec) && !vm) {
    t = MonoNowNs();
    RETURN_IF_ERROR(AttachEgress(*rec, live.get(), launched->pid, steps));
    (*steps)["egress"] = static_cast<double>(MonoNowNs() - t) / 1e6;
  }
  return Status::Ok();
}

void Node::TeardownLive(const std::string& id) {
  std::shared_ptr<Live> live;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(id);
    if (it != live_.end()) {
      live = it->second;
      live_.erase(it);
    }
  }
  if (live) live->guest->Shutdown();
  if (live) DetachEgress(live.get());
  runtime::Runtime* rt = live && live->runtime ? live->runtime : RuntimeOf(id);
  if (Status st = rt->Destroy(id); !st.ok()) LogWarn("node", "destroy " + id + ": " + st.ToString());
  if (live) uid_slots_.Release(live->uid_slot);
}

int Node::EndDisowned() {
  std::vector<std::string> ids;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, live] : live_) ids.push_back(id);
  }
  int ended = 0;
  for (const auto& id : ids) {
    auto rec = store_->GetSandbox(id);
    if (!rec.ok()) continue;  // the store is unreachable: decide nothing now
    if (rec->node == config_.node_name && rec->state != "failed" && rec->state != "destroyed") continue;
    LogWarn("node", "ending " + id + ": its record says " + rec->state + " on " + rec->node +
                        " (this node was declared lost while it ran)");
    TeardownLive(id);
    if (Status st = pool_->DestroyRoot(id); !st.ok()) LogWarn("node", st.ToString());
    ++ended;
  }
  return ended;
}

runtime::Runtime* Node::RuntimeOf(const std::string& id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(id);
    if (it != live_.end() && it->second->runtime != nullptr) return it->second->runtime;
  }
  auto rec = store_->GetSandbox(id);
  return RuntimeNamed(rec.ok() ? rec->runtime : "ns");
}

Result<store::SandboxRecord> Node::Get(const std::string& team, const std::string& id) {
  auto rec = store_->GetSandbox(id);
  if (!rec.ok() || rec->team != team) return NotFound("sandbox " + id + " not found");
  return rec;
}

Result<std::vector<store::SandboxRecord>> Node::List(const store::SandboxFilter& filter) {
  return store_->ListSandboxes(filter);
}

Result<store::OperationRecord> Node::Destroy(const std::string& team, const std::string& id) {
  ASSIGN_OR_RETURN(store::SandboxRecord rec, Get(team, id));
  if (rec.state == "destroyed") return NotFound("sandbox " + id + " not found");
  {
    std::lock_guard<std::mutex> lock(mu_);
    destroying_.insert(id);
  }
  rec.state = "destroying";
  RETURN_IF_ERROR(store_->PutSandbox(rec));
  Audit(team, id, "lifecycle", "destroy", {});
  return ops_->Submit(team, "destroy", id, [this, id] { return RunDestroy(id, "requested"); });
}

Status Node::RunDestroy(const std::string& id, const std::string& reason) {
  last_activity_mono_ns_ = MonoNowNs();
  TeardownLive(id);
  RETURN_IF_ERROR(pool_->DestroyRoot(id));
  ASSIGN_OR_RETURN(store::SandboxRecord rec, store_->GetSandbox(id));
  rec.state = "destroyed";
  rec.uid_slot = -1;
  if (reason != "requested") rec.error = reason;
  RETURN_IF_ERROR(store_->PutSandbox(rec));
  std::lock_guard<std::mutex> lock(mu_);
  destroying_.erase(id);
  return Status::Ok();
}

Result<store::SandboxRecord> Node::SetTimeout(const std::string& team, const std::string& id, int64_t timeout_s) {
  ASSIGN_OR_RETURN(store::SandboxRecord rec, Get(team, id));
  if (rec.state != "running" && rec.state != "creating" && rec.state != "paused") {
    return Conflict("sandbox " + id + " is " + rec.state + "; timeouts apply to live sandboxes");
  }
  rec.timeout_s = timeout_s;
  rec.expires_at_ms = WallNowMs() + timeout_s * 1000;
  RETURN_IF_ERROR(store_->PutSandbox(rec));
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = live_.find(id); it != live_.end()) it->second->expires_at_ms = rec.expires_at_ms;
  return rec;
}

Result<store::OperationRecord> Node::GetOperation(const std::string& team, const std::string& id) {
  auto op = store_->GetOperation(id);
  if (!op.ok() || op->team != team) return NotFound("operation " + id + " not found");
  return op;
}

Result<store::OperationRecord> Node::WaitOperation(const std::string& team, const std::string& id,
                                                   int64_t timeout_ms) {
  RETURN_IF_ERROR(GetOperation(team, id).status());
  return ops_->Wait(id, timeout_ms);
}

void Node::TimeoutLoop() {
  for (int tick = 0;; ++tick) {
    {
      std::unique_lock<std::mutex> lock(stop_mu_);
      if (stop_cv_.wait_for(lock, std::chrono::milliseconds(250), [&] { return stopping_; })) return;
    }
    if (tick % 4 == 0) pool_->CheckDiskAccounting();
    std::vector<std::pair<std::string, std::string>> expired;  // id, team
    int64_t now = WallNowMs();
    RollSnapshots(now);
    FailLostGuests();
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& [id, l] : live_) {
        if (l->expires_at_ms > 0 && l->expires_at_ms <= now && !destroying_.count(id)) {
          expired.emplace_back(id, l->team);
          destroying_.insert(id);
        }
      }
    }
    for (auto& [id, team] : expired) {
      auto rec = store_->GetSandbox(id);
      if (!rec.ok() || (rec->state != "running" && rec->state != "paused")) continue;
      if (rec->on_timeout == "suspend") {
        Audit(team, id, "lifecycle", "timeout", {{"on_timeout", "suspend"}});
        auto op = ops_->Submit(team, "timeout", id, [this, id = id]() {
          Status st = RunSuspend(id);
          std::lock_guard<std::mutex> lock(mu_);
          destroying_.erase(id);  // it may be resumed and time out again
          return st;
        });
        if (!op.ok()) LogError("node", op.status().ToString());
        continue;
      }
      rec->state = "destroying";
      if (Status st = store_->PutSandbox(*rec); !st.ok()) LogError("node", st.ToString());
      Audit(team, id, "lifecycle", "timeout", {{"on_timeout", rec->on_timeout}});
      auto op = ops_->Submit(team, "timeout", id, [this, id = id] { return RunDestroy(id, "timed out"); });
      if (!op.ok()) LogError("node", op.status().ToString());
    }
  }
}

void Node::FailLostGuests() {
  std::vector<std::pair<std::string, Status>> lost;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, l] : live_) {
      if (destroying_.count(id)) continue;
      if (auto why = l->guest->lost()) {
        lost.emplace_back(id, *why);
        destroying_.insert(id);
      }
    }
  }
  for (auto& [id, why] : lost) {
    auto rec = store_->GetSandbox(id);
    // Only a sandbox at rest is failed here: an operation in flight (a suspend, a snapshot, a
    // rollback) owns the live entry and reports the broken channel itself.
    if (!rec.ok() || (rec->state != "running" && rec->state != "paused")) {
      std::lock_guard<std::mutex> lock(mu_);
      destroying_.erase(id);
      continue;
    }
    // spaced died or broke the protocol (a hostile guest can do either): nothing can reach the
    // sandbox any more. Its processes, network and root go, as for a failed create.
    const std::string team = rec->team;
    rec->state = "failed";
    rec->error = "the sandbox's guest agent is gone (" + why.message() + ")";
    rec->uid_slot = -1;
    LogWarn("node", "failing " + id + ": " + rec->error);
    if (Status st = store_->PutSandbox(*rec); !st.ok()) LogError("node", st.ToString());
    Audit(team, id, "lifecycle", "guest_lost", {{"error", why.message()}});
    auto op = ops_->Submit(team, "fail", id, [this, id = id]() {
      TeardownLive(id);
      Status st = pool_->DestroyRoot(id);
      std::lock_guard<std::mutex> lock(mu_);
      destroying_.erase(id);
      return st;
    });
    if (!op.ok()) LogError("node", op.status().ToString());
  }
}

Status Node::Reconcile() {
  // 1. Every sandbox process of a previous run lost its channel when that run died; end what
  //    is left of them (cgroups, scratch dirs) before anything else.
  //    The vm runtime's VMMs died with the node (their reapers saw its alive pipe close);
  //    their cgroups and scratch dirs go here, and any VMM that outlived it with them.
  ASSIGN_OR_RETURN(std::set<std::string> present, runtime_->ListPresent());
  for (const auto& id : present) {
    if (Status st = runtime_->Destroy(id); !st.ok()) LogWarn("reconcile", st.ToString());
  }
  if (vm_runtime_) {
    ASSIGN_OR_RETURN(std::set<std::string> vms, vm_runtime_->ListPresent());
    for (const auto& id : vms) {
      if (Status st = vm_runtime_->Destroy(id); !st.ok()) LogWarn("reconcile", st.ToString());
    }
    present.insert(vms.begin(), vms.end());
  }
  // 2. Operations that were in flight are over: their effects are converged below.
  ASSIGN_OR_RETURN(auto ops, store_->ListUnfinishedOperations());
  for (auto& op : ops) {
    // In a fleet the store holds every node's operations: only those on this node's
    // sandboxes were in flight here.
    auto target = store_->GetSandbox(op.target);
    if (target.ok() && target->node != config_.node_name) continue;
    op.state = "failed";
    op.error = "interrupted by a node restart";
    op.finished_at_ms = WallNowMs();
    RETURN_IF_ERROR(store_->PutOperation(op));
  }
  // 3. Converge each sandbox: running ones boot again over their root; half-created ones are
  //    failed; half-destroyed ones finish.
  ASSIGN_OR_RETURN(auto records, store_->ListLiveSandboxes());
  std::set<std::string> keep;
  int booted = 0, cleaned = 0;
  for (auto& rec : records) {
    if (rec.node != config_.node_name) continue;
    if (rec.state == "suspended") continue;  // lives in the snapshot store, nothing on this node
    if (rec.state == "resuming") {
      // Interrupted while coming back: still suspended; a partial root goes in step 5.
      rec.state = "suspended";
      RETURN_IF_ERROR(store_->PutSandbox(rec));
      continue;
    }
    // Interrupted while suspending: the root is deleted only after the export landed, so it
    // is still here and the sandbox simply runs on.
    if (rec.state == "suspending") rec.state = "running";
    if (rec.state == "running" || rec.state == "paused") {
      nlohmann::json steps = nlohmann::json::object();
      Status st = Boot(&rec, &steps);
      // A paused sandbox comes back paused (its processes restarted, then frozen).
      if (st.ok() && rec.state == "paused") st = RuntimeNamed(rec.runtime)->Freeze(rec.id);
      if (st.ok()) {
        keep.insert(rec.id);
        RETURN_IF_ERROR(store_->PutSandbox(rec));
        Audit(rec.team, rec.id, "lifecycle", "reboot", {{"reason", "node restart"}});
        ++booted;
        continue;
      }
      TeardownLive(rec.id);
      rec.state = "failed";
      rec.error = "could not boot again after a node restart: " + st.message();
    } else if (rec.state == "destroying") {
      rec.state = "destroyed";
    } else {
      rec.state = "failed";
      rec.error = "interrupted by a node restart while " + rec.state;
    }
    rec.uid_slot = -1;
    if (Status st = pool_->DestroyRoot(rec.id); !st.ok()) LogWarn("reconcile", st.ToString());
    RETURN_IF_ERROR(store_->PutSandbox(rec));
    ++cleaned;
  }
  // 4. Snapshots whose record never landed (a crash between the snapshot and its record).
  ASSIGN_OR_RETURN(auto snap_ids, pool_->ListSnapshots());
  for (const auto& sid : snap_ids) {
    auto snap = store_->GetSnapshot(sid);
    if (snap.ok() && snap->state != "deleted") continue;
    if (Status st = pool_->DeleteSnapshot(sid); !st.ok()) LogWarn("reconcile", st.ToString());
    ++cleaned;
  }
  // 5. Roots nobody owns any more.
  ASSIGN_OR_RETURN(auto roots, pool_->ListRoots());
  for (const auto& id : roots) {
    if (keep.count(id)) continue;
    if (Status st = pool_->DestroyRoot(id); !st.ok()) LogWarn("reconcile", st.ToString());
    ++cleaned;
  }
  LogInfo("reconcile", "booted " + std::to_string(booted) + " sandboxes again, cleaned " + std::to_string(cleaned) +
                           ", ended " + std::to_string(present.size()) + " leftover runtimes");
  return Status::Ok();
}

Result<std::vector<storage::TemplateInfo>> Node::ListTemplates() { return pool_->ListTemplates(); }
Result<storage::TemplateInfo> Node::GetTemplate(const std::string& name) { return pool_->GetTemplate(name); }
Result<storage::TemplateInfo> Node::BuildTemplate(const std::string& name, const storage::ProgressFn& progress) {
  if (!IsBuiltinTemplate(name)) return InvalidArgument("only the built-in templates base and busybox can be built here");
  return pool_->EnsureTemplate(name, progress);
}
Result<storage::TemplateInfo> Node::ImportTemplate(const std::string& name, const std::string& source,
                                                   const storage::ProgressFn& progress) {
  if (IsBuiltinTemplate(name)) return Conflict("template " + name + " is built in");
  return pool_->ImportTemplate(name, source, progress);
}

Result<std::vector<store::AuditEvent>> Node::Audit(const store::AuditFilter& filter) {
  return store_->ListAudit(filter);
}

}  // namespace space::node
