#include "gateway/worker.h"

#include <grp.h>
#include <linux/capability.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "common/capabilities.h"
#include "common/log.h"
#include "common/mutex.h"
#include "common/syscall.h"
#include "gateway/ca.h"
#include "gateway/gateway.h"
#include "gateway/ipc.h"
#include "gateway/worker_seccomp.h"

namespace space::gateway {
namespace {

constexpr int kConfigTimeoutMs = 30000;
constexpr int kSecretTimeoutMs = 10000;

// Secret requests in flight: a connection thread waits on its id until the node answers, the
// channel dies, or kSecretTimeoutMs passes. Thread-safe.
class SecretRequests {
 public:
  explicit SecretRequests(ipc::Channel* channel) : channel_(channel) {}

  Result<std::string> Ask(const std::string& team, const std::string& name) EXCLUDES(mu_) {
    uint64_t id;
    {
      MutexLock lock(&mu_);
      if (closed_) return Unavailable("the node is gone");
      id = next_id_++;
      pending_[id] = nullptr;
    }
    Status sent = channel_->Send(ipc::Type::kSecretRequest, {{"id", id}, {"team", team}, {"name", name}});
    MutexLock lock(&mu_);
    if (!sent.ok()) {
      pending_.erase(id);
      return Unavailable("secret request: " + sent.message());
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kSecretTimeoutMs);
    bool timed_out = false;
    while (!closed_ && pending_[id] == nullptr && !timed_out) timed_out = !cv_.WaitUntil(&mu_, deadline);
    const bool answered = closed_ || pending_[id] != nullptr;
    std::unique_ptr<Result<std::string>> reply = std::move(pending_[id]);
    pending_.erase(id);
    if (!answered) return DeadlineExceeded("the node did not answer a secret request in time");
    if (!reply) return Unavailable("the node is gone");
    return std::move(*reply);
  }

  // Hands a reply to its waiter; a reply nobody waits for (timed out) is dropped.
  void Answer(const nlohmann::json& body) EXCLUDES(mu_) {
    uint64_t id = body["id"].get<uint64_t>();
    auto value = std::make_unique<Result<std::string>>(
        body.contains("secret") ? Result<std::string>(body["secret"].get<std::string>())
                                : Result<std::string>(Unavailable(body["error"].get<std::string>())));
    MutexLock lock(&mu_);
    auto it = pending_.find(id);
    if (it == pending_.end()) return;
    it->second = std::move(value);
    cv_.NotifyAll();
  }

  void Close() EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    closed_ = true;
    cv_.NotifyAll();
  }

 private:
  ipc::Channel* channel_;
  Mutex mu_;
  CondVar cv_;
  bool closed_ GUARDED_BY(mu_) = false;
  uint64_t next_id_ GUARDED_BY(mu_) = 1;
  std::map<uint64_t, std::unique_ptr<Result<std::string>>> pending_ GUARDED_BY(mu_);
};

// PR_SET_PDEATHSIG, and a check that the node did not die before it was armed. The kernel sends
// that signal with the dying node's credentials, so it reaches a worker under another uid only
// from a node that kept CAP_KILL; without it, the worker ends when its channel closes.
Status DieWithNode(pid_t node_pid) {
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) return ErrnoStatus("prctl", "PR_SET_PDEATHSIG", errno);
  if (node_pid > 0 && ::getppid() != node_pid) return Unavailable("the node exited");
  return Status::Ok();
}

}  // namespace

namespace {

// Becomes `uid` (every uid and gid, no groups, the bounding and ambient sets emptied), from root.
Status BecomeWorkerUid(uid_t uid) {
  if (uid < kMinWorkerUid || uid == static_cast<uid_t>(-1)) {
    return InvalidArgument("gateway worker uid " + std::to_string(uid) + " is a system id");
  }
  const gid_t gid = uid;
  // The bounding set needs CAP_SETPCAP to shrink, so before the uid change.
  const int last_cap = LastCapability();
  for (int cap = 0; cap <= last_cap; ++cap) {
    if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) {
      return ErrnoStatus("prctl", "PR_CAPBSET_DROP " + std::to_string(cap), errno);
    }
  }
  if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL) {
    return ErrnoStatus("prctl", "PR_CAP_AMBIENT_CLEAR_ALL", errno);
  }
  if (::setgroups(0, nullptr) != 0) return ErrnoStatus("setgroups", "0", errno);
  if (::setresgid(gid, gid, gid) != 0) return ErrnoStatus("setresgid", std::to_string(gid), errno);
  // Leaving uid 0 for a non-zero uid clears the permitted and effective sets.
  if (::setresuid(uid, uid, uid) != 0) return ErrnoStatus("setresuid", std::to_string(uid), errno);
  if (::setuid(0) == 0) return Internal("could regain root after dropping it");
  return Status::Ok();
}

}  // namespace

Status DropGatewayPrivileges(uid_t uid) {
  if (::geteuid() == 0) {
    RETURN_IF_ERROR(BecomeWorkerUid(uid));
  } else if (::getuid() != uid || ::getgid() != static_cast<gid_t>(uid)) {
    // Started as `uid` in a user namespace of its own (common/helper_spawn.h HelperUser):
    // nothing to drop but what exec left, which the check below wants empty.
    return PermissionDenied("gateway worker runs as " + std::to_string(::getuid()) + ", not " + std::to_string(uid));
  }
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (::syscall(SYS_capget, &header, data) != 0) return ErrnoStatus("capget", "self", errno);
  for (const auto& d : data) {
    if (d.effective || d.permitted || d.inheritable) return Internal("gateway worker holds capabilities");
  }
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return ErrnoStatus("prctl", "PR_SET_NO_NEW_PRIVS", errno);
  // Nothing else of its uid may ptrace it or read its memory (secrets pass through): no
  // process should share the uid, but a host account might overlap the slot range.
  if (::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) return ErrnoStatus("prctl", "PR_SET_DUMPABLE", errno);
  return Status::Ok();
}

int RunGatewayWorker(int fd, pid_t node_pid, uid_t uid) {
  if (Status st = DieWithNode(node_pid); !st.ok()) {
    LogError("gateway", st.ToString());
    return 1;
  }
  ::signal(SIGPIPE, SIG_IGN);
  ipc::Channel channel(UniqueFd(fd), ipc::Sender::kNode);
  auto fail = [&](const Status& st) {
    LogError("gateway", "worker: " + st.ToString());
    (void)channel.Send(ipc::Type::kError, {{"message", st.ToString().substr(0, 4000)}});
    return 1;
  };

  auto first = channel.Receive(kConfigTimeoutMs);
  if (!first.ok()) return fail(first.status());
  if (first->type != ipc::Type::kConfig) return fail(InvalidArgument("worker: the first message must be config"));
  GatewayConfig config = ipc::ConfigFromJson(first->body);

  // The CA: as text from a node that started this worker without root (its key file is 0600
  // root); otherwise read here, as root, before the drop, as is the upstream CA file.
  auto ca = config.ca_key_pem.empty() ? CertAuthority::LoadOrCreate(config.ca_dir)
                                      : CertAuthority::FromPem(config.ca_cert_pem, config.ca_key_pem);
  config.ca_key_pem.clear();
  if (!ca.ok()) return fail(ca.status());
  if (!config.upstream_ca_file.empty()) {
    auto pem = ReadFileToString(config.upstream_ca_file, 1 << 20);
    if (!pem.ok()) return fail(pem.status());
    config.upstream_ca_pem = std::move(*pem);
    config.upstream_ca_file.clear();
  }
  if (Status st = DropGatewayPrivileges(uid); !st.ok()) return fail(st);
  // The uid change cleared the parent-death signal.
  if (Status st = DieWithNode(node_pid); !st.ok()) return fail(st);
  // Before any thread and before the first byte of sandbox traffic.
  if (Status st = LoadWorkerSeccomp(); !st.ok()) return fail(st);

  SecretRequests secrets(&channel);
  GatewayHooks hooks;
  hooks.secret = [&secrets](const std::string& team, const std::string& name) { return secrets.Ask(team, name); };
  hooks.audit = [&channel](const SandboxEgress& s, const std::string& kind, const std::string& action,
                           nlohmann::json detail) {
    Status st = channel.Send(ipc::Type::kAudit, {{"sandbox_id", s.sandbox_id},
                                                 {"team", s.team},
                                                 {"kind", kind},
                                                 {"action", action},
                                                 {"detail", std::move(detail)}});
    if (!st.ok()) LogWarn("gateway", "audit record lost: " + st.ToString());
  };
  auto gateway = Gateway::Start(config, std::move(hooks), std::move(*ca));
  if (!gateway.ok()) return fail(gateway.status());
  Status ready = channel.Send(ipc::Type::kReady, {{"ports", ipc::PortsJson((*gateway)->ports())},
                                                  {"ca_certificate_pem", (*gateway)->ca_certificate_pem()}});
  if (!ready.ok()) return fail(ready);

  for (;;) {
    auto msg = channel.Receive(-1);
    if (!msg.ok()) {
      if (msg.status().code() == StatusCode::kInvalidArgument) {
        LogWarn("gateway", "worker: refused a message: " + msg.status().message());
        continue;
      }
      if (msg.status().code() == StatusCode::kDeadlineExceeded) continue;
      break;  // the node is gone
    }
    if (msg->type == ipc::Type::kStop) break;
    if (msg->type == ipc::Type::kSecretReply) {
      secrets.Answer(msg->body);
    } else if (msg->type == ipc::Type::kRegister || msg->type == ipc::Type::kUnregister) {
      auto address = ipc::ParseAddress(msg->body["address"]);
      if (!address.ok()) {
        LogWarn("gateway", "worker: " + address.status().message());
        continue;
      }
      if (msg->type == ipc::Type::kUnregister) {
        (*gateway)->Unregister(*address);
        continue;
      }
      auto sandbox = ipc::SandboxFromJson(msg->body["sandbox"]);
      if (!sandbox.ok()) {
        LogWarn("gateway", "worker: register: " + sandbox.status().message());
        continue;
      }
      (*gateway)->Register(*address, std::make_shared<const SandboxEgress>(std::move(*sandbox)));
    } else {
      LogWarn("gateway", "worker: unexpected " + std::string(ipc::TypeName(msg->type)));
    }
  }
  secrets.Close();
  (*gateway)->Stop();
  channel.Shutdown();
  return 0;
}

}  // namespace space::gateway
