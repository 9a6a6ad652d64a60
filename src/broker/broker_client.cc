#include "broker/broker_client.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "broker/broker.h"
#include "common/helper_spawn.h"
#include "common/host_slots.h"
#include "common/syscall.h"
#include "network/netlink.h"

namespace space::broker {
namespace {

constexpr int kBrokerFd = 3;
// Every request is a few netlink or nftables calls; a broker silent this long is wedged.
constexpr int kReplyTimeoutMs = 30000;

}  // namespace

Result<std::unique_ptr<BrokerClient>> BrokerClient::Spawn(const std::string& cgroup_name, const std::string& pool_dir,
                                                          const std::string& import_root) {
  if (!IsNodeCgroupName(cgroup_name)) return InvalidArgument("root broker: bad cgroup name " + cgroup_name);
  if (pool_dir.empty() || pool_dir[0] != '/') return InvalidArgument("root broker: pool dir must be absolute: " + pool_dir);
  if (import_root.empty() || import_root[0] != '/') {
    return InvalidArgument("root broker: import root must be absolute: " + import_root);
  }
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    return ErrnoStatus("socketpair", "root broker", errno);
  }
  UniqueFd mine(sv[0]), theirs(sv[1]);
  // A Ctrl-C reaches the whole process group; the broker must outlive the node's orderly
  // shutdown (which asks it to remove the firewall), and exits when the node's end closes.
  HelperSpec spec;
  spec.args = {"space", "broker", "--fd", std::to_string(kBrokerFd), "--node-pid", std::to_string(::getpid()),
               "--cgroup-name", cgroup_name, "--pool-dir", pool_dir, "--import-root", import_root};
  spec.fds = {{theirs.get(), kBrokerFd}};
  spec.ignore_stop_signals = true;
  Result<pid_t> spawned = SpawnHelper(spec);
  if (!spawned.ok()) return spawned.status().Annotate("root broker");
  const pid_t pid = *spawned;
  theirs.reset();
  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) {
    int err = errno;
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return ErrnoStatus("pidfd_open", "root broker", err);
  }
  auto client = std::make_unique<BrokerClient>(std::move(mine), pid, UniqueFd(pidfd));
  Request hello;
  hello.op = Op::kHello;
  auto reply = client->Call(hello);
  if (!reply.ok()) return reply.status().Annotate("root broker did not start");
  return client;
}

BrokerClient::BrokerClient(UniqueFd socket, pid_t pid, UniqueFd pidfd)
    : socket_(std::move(socket)), pid_(pid), pidfd_(std::move(pidfd)) {}

BrokerClient::~BrokerClient() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    socket_.reset();  // the broker sees EOF and exits
  }
  if (pid_ > 0 && !reaped_) (void)WaitExited(5000);
  if (pid_ > 0 && !reaped_) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

bool BrokerClient::WaitExited(int timeout_ms) {
  if (reaped_) return true;
  if (!pidfd_.valid()) return false;
  pollfd p{pidfd_.get(), POLLIN, 0};
  if (RetryEintr([&] { return ::poll(&p, 1, timeout_ms); }) <= 0) return false;
  ::waitpid(pid_, nullptr, WNOHANG);
  reaped_ = true;
  return true;
}

Result<nlohmann::json> BrokerClient::Call(const Request& request, int fd, std::vector<UniqueFd>* reply_fds) {
  std::vector<int> fds;
  if (fd >= 0) fds.push_back(fd);
  return Call(request, fds, reply_fds);
}

Result<nlohmann::json> BrokerClient::Call(const Request& request, const std::vector<int>& fds,
                                          std::vector<UniqueFd>* reply_fds) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!socket_.valid()) return Unavailable("root broker: gone");
  RETURN_IF_ERROR(SendDatagram(socket_.get(), EncodeRequest(request), fds).Annotate(std::string(OpName(request.op))));
  pollfd p{socket_.get(), POLLIN, 0};
  int r = RetryEintr([&] { return ::poll(&p, 1, kReplyTimeoutMs); });
  if (r <= 0) {
    // A late reply must never be taken for the next request's, and a wedged broker is no
    // broker: end it, so whoever waits on its exit (space dev) stops the node for a restart.
    socket_.reset();
    if (pid_ > 0) ::kill(pid_, SIGKILL);
    return DeadlineExceeded("root broker: no reply to " + std::string(OpName(request.op)) + " in 30 s; killed it");
  }
  ASSIGN_OR_RETURN(Datagram d, ReceiveDatagram(socket_.get()));
  ASSIGN_OR_RETURN(nlohmann::json reply, DecodeReply(d.bytes));
  if (reply_fds) *reply_fds = std::move(d.fds);
  return reply;
}

Result<int64_t> BrokerClient::NetAcquire() {
  Request r;
  r.op = Op::kNetAcquire;
  ASSIGN_OR_RETURN(nlohmann::json reply, Call(r));
  if (!reply.contains("net_slot") || !reply["net_slot"].is_number_integer()) {
    return Internal("root broker: net_acquire reply has no net_slot");
  }
  int64_t slot = reply["net_slot"].get<int64_t>();
  if (slot < 0 || slot >= kMaxNetSlots) return Internal("root broker: net_slot out of range");
  return slot;
}

Status BrokerClient::InstallFirewall(const network::GatewayPorts& ports) {
  Request r;
  r.op = Op::kFirewallInstall;
  r.ports = ports;
  return Call(r).status();
}

Result<in_addr> BrokerClient::NetAttach(int64_t uid_slot, pid_t init_pid) {
  // A pidfd, not a pid: the broker checks the process behind it, and that it did not exit.
  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, init_pid, 0));
  if (pidfd < 0) return ErrnoStatus("pidfd_open", "sandbox init " + std::to_string(init_pid), errno);
  UniqueFd owned(pidfd);
  Request r;
  r.op = Op::kNetAttach;
  r.uid_slot = uid_slot;
  ASSIGN_OR_RETURN(nlohmann::json reply, Call(r, owned.get()));
  if (!reply.contains("address") || !reply["address"].is_string()) {
    return Internal("root broker: net_attach reply has no address");
  }
  return network::ParseIpv4(reply["address"].get<std::string>());
}

Result<in_addr> BrokerClient::NetTap(int64_t uid_slot, UniqueFd* tap) {
  Request r;
  r.op = Op::kNetTap;
  r.uid_slot = uid_slot;
  std::vector<UniqueFd> fds;
  ASSIGN_OR_RETURN(nlohmann::json reply, Call(r, -1, &fds));
  if (fds.size() != 1) return Internal("root broker: net_tap reply without its descriptor");
  if (!reply.contains("address") || !reply["address"].is_string()) {
    return Internal("root broker: net_tap reply has no address");
  }
  ASSIGN_OR_RETURN(in_addr address, network::ParseIpv4(reply["address"].get<std::string>()));
  *tap = std::move(fds[0]);
  return address;
}

Status BrokerClient::NetDetach(int64_t uid_slot) {
  Request r;
  r.op = Op::kNetDetach;
  r.uid_slot = uid_slot;
  return Call(r).status();
}

Status BrokerClient::NetReconcile(const std::vector<int64_t>& keep_uid_slots) {
  Request r;
  r.op = Op::kNetReconcile;
  r.keep = keep_uid_slots;
  return Call(r).status();
}

Status BrokerClient::NetRelease() {
  Request r;
  r.op = Op::kNetRelease;
  return Call(r).status();
}

Status BrokerClient::SeqpacketPair(int64_t send_buffer_bytes, UniqueFd* a, UniqueFd* b) {
  Request r;
  r.op = Op::kSeqpacketPair;
  r.send_buffer_bytes = send_buffer_bytes;
  std::vector<UniqueFd> fds;
  RETURN_IF_ERROR(Call(r, -1, &fds).status());
  if (fds.size() != 2) return Internal("root broker: seqpacket_pair reply without two descriptors");
  *a = std::move(fds[0]);
  *b = std::move(fds[1]);
  return Status::Ok();
}

Status BrokerClient::CgroupAct(const Request& request, int pidfd) {
  switch (request.op) {
    case Op::kCgroupCreate:
    case Op::kCgroupUpdate:
    case Op::kCgroupFreeze:
    case Op::kCgroupKill:
    case Op::kCgroupRemove:
    case Op::kCgroupParents:
      return Call(request).status();
    case Op::kCgroupAttach:
      return Call(request, pidfd).status();
    default:
      return InvalidArgument("root broker: not a cgroup request");
  }
}

Status BrokerClient::KillChild(int pidfd) {
  Request r;
  r.op = Op::kKillChild;
  return Call(r, pidfd).status();
}

Status BrokerClient::MapUserns(const runtime::ns::IdMapRequest& request) {
  // Uid slot n starts at host id (kFirstSlot + n) * 65536; anything else is no slot's.
  const uint32_t base = request.uid_base;
  if (base % 65536 != 0 || base < HostSlots::UidBase(0) || base > HostSlots::UidBase(HostSlots::kMaxSlots - 1)) {
    return InvalidArgument("uid base " + std::to_string(base) + " is not the start of a uid slot");
  }
  Request r;
  r.op = Op::kUsernsMap;
  r.uid_slot = base / 65536 - HostSlots::kFirstSlot;
  r.shape = request.shape;
  r.kvm_gid = request.kvm_gid;
  return Call(r, request.pidfd).status();
}

Result<UniqueFd> BrokerClient::IdmapTree(int dir_fd, int pidfd, uint32_t uid_base, bool read_only) {
  if (uid_base % 65536 != 0 || uid_base < HostSlots::UidBase(0) || uid_base > HostSlots::UidBase(HostSlots::kMaxSlots - 1)) {
    return InvalidArgument("uid base " + std::to_string(uid_base) + " is not the start of a uid slot");
  }
  Request r;
  r.op = Op::kIdmapTree;
  r.uid_slot = uid_base / 65536 - HostSlots::kFirstSlot;
  r.read_only = read_only;
  std::vector<UniqueFd> fds;
  RETURN_IF_ERROR(Call(r, {dir_fd, pidfd}, &fds).status());
  if (fds.size() != 1) return Internal("root broker: idmap_tree reply carries " + std::to_string(fds.size()) + " descriptors");
  return std::move(fds[0]);
}

Status BrokerClient::DeleteSubvolume(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == path.size()) {
    return InvalidArgument("delete subvolume: " + path + " is not an absolute path to a subvolume");
  }
  Result<UniqueFd> parent = OpenFd(path.substr(0, slash), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (!parent.ok()) return parent.status().code() == StatusCode::kNotFound ? Status::Ok() : parent.status();
  Request r;
  r.op = Op::kSubvolDelete;
  r.name = path.substr(slash + 1);
  return Call(r, parent->get()).status();
}

Status BrokerClient::SnapshotSubvolume(const std::string& source, const std::string& path, bool read_only) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == path.size()) {
    return InvalidArgument("snapshot: " + path + " is not an absolute path in a pool directory");
  }
  // By name only: a root its sandbox made 0700 is not the node's to open for reading.
  ASSIGN_OR_RETURN(UniqueFd src, OpenFd(source, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  ASSIGN_OR_RETURN(UniqueFd parent, OpenFd(path.substr(0, slash), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  Request r;
  r.op = Op::kSubvolSnapshot;
  r.name = path.substr(slash + 1);
  r.read_only = read_only;
  return Call(r, {src.get(), parent.get()}, nullptr).status();
}

Status BrokerClient::CreateSubvolume(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == path.size()) {
    return InvalidArgument("create subvolume: " + path + " is not an absolute path in a pool directory");
  }
  ASSIGN_OR_RETURN(UniqueFd parent, OpenFd(path.substr(0, slash), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  Request r;
  r.op = Op::kSubvolCreate;
  r.name = path.substr(slash + 1);
  return Call(r, parent.get()).status();
}

Result<UniqueFd> BrokerClient::OpenImportSource(const std::string& source) {
  Request r;
  r.op = Op::kImportOpen;
  r.source = source;
  std::vector<UniqueFd> fds;
  RETURN_IF_ERROR(Call(r, -1, &fds).status());
  if (fds.size() != 1) return Internal("root broker: import_open reply carries " + std::to_string(fds.size()) + " descriptors");
  return std::move(fds[0]);
}

Status BrokerClient::MakeVmStateDir(const std::string& rootfs) {
  // By name only: a root its sandbox made 0700 is not the node's to open for reading.
  ASSIGN_OR_RETURN(UniqueFd root, OpenFd(rootfs, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  Request r;
  r.op = Op::kVmStateDir;
  return Call(r, root.get()).status();
}

Status BrokerClient::SetExclusiveLimit(const std::string& subvol_path, uint64_t bytes) {
  if (bytes == 0 || bytes > static_cast<uint64_t>(kMaxQgroupLimitBytes)) {
    return InvalidArgument("qgroup limit " + std::to_string(bytes) + " is out of range");
  }
  ASSIGN_OR_RETURN(UniqueFd fd, OpenFd(subvol_path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  Request r;
  r.op = Op::kQgroupLimit;
  r.bytes = static_cast<int64_t>(bytes);
  return Call(r, fd.get()).status();
}

Result<bool> BrokerClient::RescanQuotaIfInconsistent() {
  Request r;
  r.op = Op::kQuotaRescan;
  ASSIGN_OR_RETURN(nlohmann::json reply, Call(r));
  if (!reply.contains("started") || !reply["started"].is_boolean()) {
    return Internal("root broker: quota_rescan reply has no started");
  }
  return reply["started"].get<bool>();
}

Status BrokerClient::SetChildNice(int pidfd, int nice) {
  Request r;
  r.op = Op::kChildNice;
  r.nice = nice;
  return Call(r, pidfd).status();
}

Status BrokerClient::SetThreadNice(pid_t tid, int nice) {
  Request r;
  r.op = Op::kNodeThreadNice;
  r.tid = tid;
  r.nice = nice;
  return Call(r).status();
}

Result<int64_t> BrokerClient::UidAcquire(int64_t preferred) {
  Request r;
  r.op = Op::kUidAcquire;
  r.preferred = preferred >= 0 && preferred < HostSlots::kMaxSlots ? preferred : -1;
  ASSIGN_OR_RETURN(nlohmann::json reply, Call(r));
  if (!reply.contains("uid_slot") || !reply["uid_slot"].is_number_integer()) {
    return Internal("root broker: uid_acquire reply has no uid_slot");
  }
  int64_t slot = reply["uid_slot"].get<int64_t>();
  if (slot < 0 || slot >= HostSlots::kMaxSlots) return Internal("root broker: uid_acquire reply is out of range");
  return slot;
}

Status BrokerClient::UidRelease(int64_t uid_slot) {
  Request r;
  r.op = Op::kUidRelease;
  r.uid_slot = uid_slot;
  return Call(r).status();
}

}  // namespace space::broker
