#include "daemon/dev.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <iterator>
#include <thread>
#include <vector>

#include "api/api.h"
#include "broker/broker.h"
#include "broker/broker_client.h"
#include "common/capabilities.h"
#include "common/helper_spawn.h"
#include "common/host_slots.h"
#include "common/kill_child.h"
#include "common/log.h"
#include "common/nice.h"
#include "common/syscall.h"
#include "e2b/e2b.h"
#include "front/front.h"
#include "front/front_process.h"
#include "http/http_server.h"
#include "ingress/ingress.h"
#include "node/heartbeat.h"
#include "node/node.h"
#include "node/node_seccomp.h"
#include "node/node_user.h"
#include "runtime/ns/mounts.h"
#include "runtime/ns/userns.h"
#include "runtime/vm/kvm_probe.h"
#include "runtime/vm/vm_runtime.h"
#include "snapshot/s3_location.h"
#include "storage/btrfs.h"
#include "storage/pool_mount.h"
#include "storage/template_builder.h"
#include "store/open_store.h"
#include "store/store.h"

namespace space::daemon {
namespace {

// A DNS name of letters, digits, '-' and '.', as preview hosts end with it.
bool ValidPreviewDomain(const std::string& d) {
  if (d.empty() || d.size() > 200 || d.front() == '.' || d.back() == '.' || d.find("..") != std::string::npos)
    return false;
  for (char c : d) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.') return false;
  }
  return true;
}

// The API front's preferred uid slot: below the gateway workers' (the top 100), above where
// sandboxes start (the lowest free).
constexpr int64_t kFrontUidSlot = HostSlots::kMaxSlots - 201;

std::string SelfDir() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  std::string p(buf, static_cast<size_t>(n));
  return p.substr(0, p.rfind('/'));
}

// Many sandboxes mean many channel fds and uid-slot locks.
void RaiseFdLimit() {
  rlimit rl;
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    (void)::setrlimit(RLIMIT_NOFILE, &rl);
  }
}

// Hands the node what it writes (node/node_user.h) and switches it to HostSlots::NodeUid, with
// the capabilities it still holds (permitted and effective, none inheritable: no program it
// runs gets one), then checks that it can reach every directory it was given.
Status BecomeNodeUser(const DevOptions& options, const storage::PoolMount& pool) {
  const uid_t uid = HostSlots::NodeUid();
  // Every sandbox, jail and helper starts in a user namespace the node makes: once it is not
  // root, the host must let unprivileged processes make them (Debian's sysctl; 0 or an
  // exhausted limit would fail every create later, less clearly).
  for (const char* knob : {"/proc/sys/kernel/unprivileged_userns_clone", "/proc/sys/user/max_user_namespaces"}) {
    Result<std::string> v = ReadFileToString(knob, 64);
    const long n = v.ok() ? std::strtol(v->c_str(), nullptr, 10) : 1;
    if (n <= 0) {
      return Unavailable(std::string(knob) + " is " + std::to_string(n) +
                         ": the node, which runs unprivileged, must be able to make user namespaces (set it to 1 or more)");
    }
  }
  // The host-wide run dir: traversable by the node and its helpers, listable by nobody else.
  const std::string run = HostRunDir();
  RETURN_IF_ERROR(MakeDirs(run, 0711));
  if (::chmod(run.c_str(), 0711) != 0) return ErrnoStatus("chmod", run, errno);
  // The API front's empty root is root's, so no process of SPACE can write it.
  RETURN_IF_ERROR(front::MakeFrontRoot(run + "/empty"));
  const node::Node::RunDirs run_dirs = node::Node::RunDirsOf(options.data_dir);
  const char* cache = std::getenv("SPACE_VM_CACHE_DIR");
  std::vector<node::NodeDir> dirs = {
      {.path = options.data_dir,
       .files = {"state.db", "state.db-wal", "state.db-shm", "state.db-journal", "api-key", "credentials.kek",
                 "e2b-token.key"}},
      {.path = options.data_dir + "/gateway", .recursive = true},
      {.path = options.snapshot_store.empty() ? options.data_dir + "/store" : options.snapshot_store,
       .recursive = true},
      // The pool's top and its directories, with what they hold on the top subvolume (the
      // template index, VM disk images); never a sandbox root, snapshot or template, each a
      // subvolume of its own (another st_dev), which stays its own root's.
      {.path = pool.pool_dir},
      {.path = pool.pool_dir + "/sandboxes", .recursive = true},
      {.path = pool.pool_dir + "/snapshots", .recursive = true},
      {.path = pool.pool_dir + "/templates", .recursive = true},
      {.path = pool.pool_dir + "/volumes", .recursive = true},
      {.path = pool.pool_dir + "/vm-images", .recursive = true},
      {.path = run_dirs.ns, .recursive = true, .mode = 0711},
      {.path = run_dirs.vm, .recursive = true, .mode = 0711},
      {.path = run_dirs.build, .recursive = true, .mode = 0711},
      // World-readable: the VMM, under its own uid, reads the kernel and initramfs.
      {.path = cache != nullptr ? cache : runtime::RuntimeConfig{}.vm_cache_dir, .recursive = true, .mode = 0755},
  };
  RETURN_IF_ERROR(node::GiveToNodeUser(dirs, uid));
  RETURN_IF_ERROR(node::CheckNodeCanReach(dirs, uid));
  return BecomeUserKeepingCapabilities(uid, uid, {});
}

}  // namespace

bool ParseListen(const std::string& listen, std::string* address, uint16_t* port) {
  size_t colon = listen.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  char* end = nullptr;
  long p = std::strtol(listen.c_str() + colon + 1, &end, 10);
  if (end == listen.c_str() + colon + 1 || *end != '\0' || p < 0 || p > 65535) return false;
  *address = listen.substr(0, colon);
  *port = static_cast<uint16_t>(p);
  return true;
}

Result<std::string> ReadFleetToken(const std::string& path) {
  if (path.empty()) return InvalidArgument("--fleet-token-file is required: the secret shared by the fleet");
  ASSIGN_OR_RETURN(std::string token, ReadFileToString(path, 4096));
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
  if (token.size() < 32) return InvalidArgument("fleet token in " + path + " is shorter than 32 characters");
  return token;
}

// Capabilities that act only in the initial user namespace and that neither the node nor any
// program it runs (debootstrap, apt-get, mkfs, QEMU) uses: modules, raw I/O, BPF and perf, the
// clock, audit and MAC policy, the kernel log, reboot, accounting, immutable files, leases.
// Dropped from the bounding set as well, so no child regains them by exec. Sandboxes lose
// nothing: inside their user namespace these never applied. (The node keeps the rest of
// root until the privileged acts move into a broker: docs/privilege-inventory.md.)
constexpr int kHostOnlyCapabilities[] = {
    CAP_LINUX_IMMUTABLE, CAP_SYS_MODULE, CAP_SYS_RAWIO,   CAP_SYS_PACCT, CAP_SYS_BOOT,
    CAP_SYS_TIME,        CAP_SYS_TTY_CONFIG, CAP_LEASE,   CAP_AUDIT_CONTROL, CAP_MAC_OVERRIDE,
    CAP_MAC_ADMIN,       CAP_SYSLOG,     CAP_WAKE_ALARM,  CAP_BLOCK_SUSPEND, CAP_AUDIT_READ,
    CAP_PERFMON,         CAP_BPF};

// Capabilities that act on the host too and that nothing the node does or runs needs: SysV
// IPC ownership and memory locking (IPC_OWNER would let the node read any process's SysV
// shared memory), resource-limit overrides, and checkpoint/restore (choosing pids, reading
// other processes' map_files). Dropped with the host-only ones.
constexpr int kUnusedCapabilities[] = {CAP_IPC_LOCK, CAP_IPC_OWNER, CAP_SYS_RESOURCE, CAP_CHECKPOINT_RESTORE};

// Capabilities the node used only while it started (or for tools it no longer runs as root):
// chroot (debootstrap now runs in the build jail, and the API front chroots from a user
// namespace of its own), audit records (no login tool runs unjailed), and CAP_SETPCAP, which
// shrinks a bounding set: its helpers, sandboxes and VMMs empty theirs inside their own user
// namespaces. CHOWN, FSETID, MKNOD and SETFCAP wrote new templates' trees (an import's owners,
// setuid bits, device nodes and file capabilities; busybox's home/user): every step that
// writes a template now runs in the build jail, root of its own user namespace only
// (storage/template_builder.h). Dropped with the last set, when nothing needs them any more
// (CAP_SETPCAP is still what lets that very call drop bounding-set bits).
constexpr int kNodeUnusedAfterStart[] = {CAP_SYS_CHROOT, CAP_AUDIT_WRITE, CAP_SETPCAP, CAP_CHOWN,
                                         CAP_FSETID,     CAP_MKNOD,       CAP_SETFCAP};

int RunDev(const DevOptions& options) {
  if (::geteuid() != 0) {
    std::cerr << "space dev: must run as root (it creates namespaces, cgroups and the storage pool)\n";
    return 1;
  }
  api::HttpServerConfig hc;
  if (!ParseListen(options.listen, &hc.address, &hc.port)) {
    std::cerr << "space dev: --listen must be ADDR:PORT\n";
    return 2;
  }
  // Every flag is checked before anything is bound, mounted or made: a refused start leaves
  // nothing behind (a bad --warm-pool once left a pool mounted under its --data-dir).
  const bool fleet = !options.node_name.empty();
  std::string fleet_token;
  if (fleet) {
    if (options.store.empty()) {
      std::cerr << "space node: --store must name the fleet's shared store (postgres://...)\n";
      return 2;
    }
    auto token = ReadFleetToken(options.fleet_token_file);
    if (!token.ok()) {
      std::cerr << "space node: " << token.status().ToString() << "\n";
      return 2;
    }
    fleet_token = *token;
  }
  std::string import_roots = options.import_root;
  if (!options.trusted_template_sources.empty()) {
    if (options.import_root != "/") {
      std::cerr << "space dev: give --trusted-template-source or --import-root, not both\n";
      return 2;
    }
    import_roots.clear();
    for (const auto& dir : options.trusted_template_sources) {
      if (dir.find(':') != std::string::npos) {
        std::cerr << "space dev: --trusted-template-source " << dir << ": a source may not hold ':'\n";
        return 2;
      }
      import_roots += (import_roots.empty() ? "" : ":") + dir;
    }
  }
  for (const auto& root : storage::SplitImportRoots(import_roots)) {
    struct stat st;
    if (root[0] != '/' || ::stat(root.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      std::cerr << "space dev: " << root
                << ": --import-root and --trusted-template-source name existing directories by absolute paths\n";
      return 2;
    }
  }
  if (import_roots.empty()) {
    std::cerr << "space dev: --import-root must name an existing directory by its absolute path\n";
    return 2;
  }
  auto warm = node::ParseWarmPoolSpec(options.warm_pool);
  if (!warm.ok()) {
    std::cerr << "space dev: " << warm.status().message() << "\n";
    return 2;
  }
  if (options.preview_port < 0 || options.preview_port > 65535) {
    std::cerr << "space dev: --preview-port: want 1..65535\n";
    return 1;
  }
  if (!ValidPreviewDomain(options.preview_domain)) {
    std::cerr << "space dev: --preview-domain: want a DNS name such as localhost or preview.example.com\n";
    return 1;
  }
  if (auto accel = runtime::vm::ParseAccel(options.accel); !accel.ok()) {
    std::cerr << "space dev: --accel: " << accel.status().message() << "\n";
    return 2;
  }
  api::RateLimit rate_limit;
  if (!api::ParseRateLimit(options.api_rate_limit, &rate_limit)) {
    std::cerr << "space dev: --api-rate-limit must be RATE[:BURST] (requests per second)\n";
    return 2;
  }
  // The API's socket, bound first: binding below 1024 is the only use of CAP_NET_BIND_SERVICE
  // (the gateway binds high ports), which then goes with the rest. The node never accepts on
  // it: its API front does (front/front.h).
  auto listener = api::ListenTcp(hc.address, hc.port);
  if (!listener.ok()) {
    std::cerr << "space dev: " << listener.status().ToString() << "\n";
    return 1;
  }
  auto listening_port = api::ListeningPort(listener->get());
  const uint16_t bound = listening_port.ok() ? *listening_port : hc.port;
  // Then, while this is the only thread: capability sets are per thread, and the broker is
  // forked from this one.
  std::vector<int> drop(std::begin(kHostOnlyCapabilities), std::end(kHostOnlyCapabilities));
  drop.insert(drop.end(), std::begin(kUnusedCapabilities), std::end(kUnusedCapabilities));
  drop.push_back(CAP_NET_BIND_SERVICE);
  if (Status st = DropCapabilities(drop); !st.ok()) {
    std::cerr << "space dev: " << st.ToString() << "\n";
    return 1;
  }
  // The storage pool first, while this process still holds CAP_SYS_ADMIN: a loop device, the
  // mount, quota control and a rescan wait need it; afterwards only the broker's acts do.
  storage::PoolConfig pool_config;
  pool_config.data_dir = options.data_dir;
  pool_config.force_overlay = options.force_overlay;
  auto pool_mount = storage::MountPool(pool_config);
  if (!pool_mount.ok()) {
    std::cerr << "space dev: storage pool: " << pool_mount.status().ToString() << "\n";
    return 1;
  }
  // A sandbox's root is an idmapped mount of its tree, and overlayfs refuses to be idmapped
  // (mount_setattr MOUNT_ATTR_IDMAP: EINVAL; it takes idmapped layers instead, which the ns
  // runtime does not build). Say so now rather than fail every create.
  if (!pool_mount->btrfs) {
    std::cerr << "space dev: the storage pool at " << pool_mount->pool_dir
              << " is overlay, and sandboxes cannot start on it (overlayfs refuses idmapped mounts); "
                 "SPACE needs btrfs, native or loop-backed (the default)\n";
    return 1;
  }
  // The root broker keeps what the node now gives up, bounding set included: the node can
  // neither use those capabilities nor regain them by exec, nor restart a broker that dies.
  auto broker =
      broker::BrokerClient::Spawn(node::Node::CgroupName(options.data_dir), pool_mount->pool_dir, import_roots);
  if (!broker.ok()) {
    std::cerr << "space dev: " << broker.status().ToString() << "\n";
    return 1;
  }
  // From here on, what the node gave up the broker does for it: kills of its children under
  // other uids, id maps, idmapped clones, the pool's btrfs acts, nice values, the vm state dir
  // (common/privileged_acts.h). It is handed to each part that needs one of these acts; the
  // broker lives until this process exits (_exit below).
  PrivilegedActs* const privileged = broker->get();
  // What the node reads by name only once, read now, while it may: an admin's CA file may be
  // root's alone, and the guest binary may sit below a directory only root may search (a
  // checkout in /root). The binary is kept open and named through this process's descriptor
  // table, which reaches the file whatever the directories above it.
  std::string upstream_ca_pem;
  if (!options.egress_upstream_ca.empty()) {
    auto pem = ReadFileToString(options.egress_upstream_ca, 256 << 10);
    if (!pem.ok()) {
      std::cerr << "space dev: --egress-upstream-ca: " << pem.status().ToString() << "\n";
      return 1;
    }
    upstream_ca_pem = std::move(*pem);
  }
  // The object store's keys, likewise: the file may be root's alone (mode 0600).
  snapshot::S3Credentials object_store_keys;
  if (!options.object_store.empty() && !options.snapshot_store.empty()) {
    std::cerr << "space dev: --object-store and --snapshot-store name two snapshot stores; give one\n";
    return 1;
  }
  if (!options.object_store.empty()) {
    auto keys = snapshot::LoadS3Credentials(options.object_store_credentials);
    if (!keys.ok()) {
      std::cerr << "space dev: --object-store: " << keys.status().ToString() << "\n";
      return 1;
    }
    object_store_keys = std::move(*keys);
  }
  const std::string guest_path = options.guest_binary.empty() ? SelfDir() + "/spaced" : options.guest_binary;
  auto guest = OpenFd(guest_path, O_PATH | O_CLOEXEC);
  if (!guest.ok()) {
    std::cerr << "space dev: guest binary: " << guest.status().ToString() << "\n";
    return 1;
  }
  // From here the node runs as a uid of its own (HostSlots::NodeUid), no longer root: it owns
  // its data dir, run dirs and VM cache, and what it still needs of root's power on the rest
  // the broker does. Handed over while this process may still chown.
  if (Status st = BecomeNodeUser(options, *pool_mount); !st.ok()) {
    std::cerr << "space dev: " << st.ToString() << "\n";
    // Still root when the hand-over or the check fails: the pool's mount (and its loop device,
    // which clears itself) goes with this start.
    if (::getuid() == 0) (void)::umount2(pool_mount->pool_dir.c_str(), MNT_DETACH);
    return 1;
  }
  std::vector<int> node_drop(std::begin(broker::kNodeDroppedCapabilities), std::end(broker::kNodeDroppedCapabilities));
  node_drop.insert(node_drop.end(), std::begin(kNodeUnusedAfterStart), std::end(kNodeUnusedAfterStart));
  // Nothing the node does on its btrfs pool needs CAP_SYS_ADMIN any more, nor CAP_FOWNER (the
  // snapshots of roots it does not own are the broker's).
  node_drop.push_back(CAP_SYS_ADMIN);
  node_drop.push_back(CAP_FOWNER);
  // Nor does it read what it does not own: an import's source is opened by the broker and read
  // in the build jail, a vm template's disk image is made there, and a root its sandbox made
  // unreadable gets its mount points checked by its own init.
  node_drop.push_back(CAP_DAC_READ_SEARCH);
  if (Status st = DropCapabilities(node_drop); !st.ok()) {
    std::cerr << "space dev: " << st.ToString() << "\n";
    return 1;
  }
  // The kernel surfaces CAP_SYS_ADMIN still opens and nothing of SPACE uses (bpf, perf, ...):
  // refused for good, in this process and everything it starts.
  if (Status st = node::LoadNodeSeccomp(); !st.ok()) {
    std::cerr << "space dev: " << st.ToString() << "\n";
    return 1;
  }
  RaiseFdLimit();
  // Writes to a client that went away must fail with EPIPE, not kill the server.
  ::signal(SIGPIPE, SIG_IGN);

  if (Status st = MakeDirs(options.data_dir, 0700); !st.ok()) {
    std::cerr << "space dev: " << st.ToString() << "\n";
    return 1;
  }
  // The data dir still holds what is local to this machine (pool, sandbox roots, API key file)
  // when the store is elsewhere.
  std::string store_url = options.store.empty() ? options.data_dir + "/state.db" : options.store;
  auto store = store::OpenStore(store_url);
  if (!store.ok()) {
    std::cerr << "space dev: " << store.status().ToString() << "\n";
    return 1;
  }
  std::string key_path = options.data_dir + "/api-key";
  if (Status st = api::Api::EnsureAdminKey(store->get(), key_path); !st.ok()) {
    std::cerr << "space dev: " << st.ToString() << "\n";
    return 1;
  }
  node::NodeConfig nc;
  nc.data_dir = options.data_dir;
  nc.egress = !options.no_egress;
  nc.egress_upstream_dns = options.egress_dns;
  nc.egress_upstream_ca = options.egress_upstream_ca;
  nc.egress_upstream_ca_pem = std::move(upstream_ca_pem);
  nc.guest_binary = "/proc/self/fd/" + std::to_string(guest->get());
  nc.force_overlay = options.force_overlay;
  nc.import_root = import_roots;
  nc.pool_mount = *pool_mount;
  nc.warm_pool = std::move(*warm);
  nc.vm_accel = options.accel;
  nc.ports.domain = options.preview_domain;
  nc.ports.listen_port = options.preview_port > 0 ? static_cast<uint16_t>(options.preview_port) : bound;
  nc.broker = broker->get();
  nc.object_store = options.object_store;
  nc.object_store_keys = object_store_keys;
  if (fleet) {
    nc.node_name = options.node_name;
    nc.store_dir = options.snapshot_store;
    nc.share_templates = true;
    nc.template_record_key = fleet_token;
  }
  // Signals are taken synchronously by this thread; every other thread inherits the mask.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  auto node = node::Node::Start(nc, store->get());
  if (!node.ok()) {
    std::cerr << "space dev: " << node.status().ToString() << "\n";
    return 1;
  }
  api::Api api(node->get(), rate_limit, fleet_token);
  // The E2B-compatible surface shares the listener; it answers only its own paths/headers.
  e2b::E2b e2b(node->get(), api.authenticator(), options.data_dir + "/e2b-token.key");
  if (Status st = e2b.Init(); !st.ok()) {
    std::cerr << "space dev: " << st.ToString() << "\n";
    return 1;
  }
  // The node's HTTP server listens on nothing: it serves the connections its API front hands
  // it, each a request the front has already read whole from a client.
  // Preview hosts first: a request for a port inside a sandbox is the sandbox's, whatever
  // its path (ingress/ingress.h).
  ingress::Ingress ingress(&(*node)->ports());
  api::HttpServer server(hc, [&api, &e2b, &ingress](api::Request& req, api::Responder& res) {
    if (ingress.Handle(req, res)) return;
    if (e2b::E2b::Handles(req)) return e2b.Handle(req, res);
    api.Handle(req, res);
  });
  // The front runs under a uid slot of its own, leased from the broker for the node's life,
  // in a user namespace the broker maps to that uid alone: it never runs as root.
  auto front_slot = broker->get()->UidAcquire(kFrontUidSlot);
  if (!front_slot.ok()) {
    std::cerr << "space dev: API front uid: " << front_slot.status().ToString() << "\n";
    return 1;
  }
  HelperUser front_user;
  front_user.uid = HostSlots::UidBase(*front_slot);
  front_user.map_ids = [uid = front_user.uid, privileged](int pidfd, pid_t pid) {
    return runtime::ns::MapIds(privileged, {.pidfd = pidfd, .pid = pid, .uid_base = uid, .shape = IdMapShape::kOneId});
  };
  auto front = front::FrontProcess::Start(std::move(*listener), &server, std::move(front_user), privileged);
  if (!front.ok()) {
    std::cerr << "space dev: " << front.status().ToString() << "\n";
    return 1;
  }
  std::unique_ptr<node::Heartbeat> heartbeat;
  if (fleet) {
    node::HeartbeatConfig hb;
    hb.name = options.node_name;
    hb.url = options.advertise.empty() ? "http://" + hc.address + ":" + std::to_string(bound) : options.advertise;
    hb.capacity = options.capacity;
    heartbeat = std::make_unique<node::Heartbeat>(hb, node->get(), store->get());
    if (Status st = heartbeat->Start(); !st.ok()) {
      std::cerr << "space node: " << st.ToString() << "\n";
      return 1;
    }
  }
  // A broker that dies cannot be replaced (its capabilities are gone from this process): stop,
  // and let whatever restarts the node reconcile.
  std::atomic<bool> broker_died{false};
  std::thread([b = broker->get(), &broker_died] {
    while (!b->WaitExited(-1)) {
    }
    LogError("dev", "the root broker exited; stopping the node");
    broker_died = true;
    ::kill(::getpid(), SIGTERM);
  }).detach();
  std::printf("SPACE listening on http://%s:%u\nAPI key in %s\n", hc.address.c_str(), bound, key_path.c_str());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&sigs, &sig);
  LogInfo("dev", "shutting down");
  if (heartbeat) heartbeat->Stop();
  (*front)->Stop();
  server.Stop();
  (*node)->Stop();
  LogInfo("dev", "stopped");
  // Connection threads are detached and may still be inside a handler (a long SSE stream);
  // leaving without running destructors keeps them from touching freed objects. Everything
  // durable is already in the store.
  std::fflush(stdout);
  std::fflush(stderr);
  ::_exit(broker_died ? 1 : 0);
}

}  // namespace space::daemon
