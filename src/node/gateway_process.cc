#include "node/gateway_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "common/clock.h"
#include "common/helper_spawn.h"
#include "common/kill_child.h"
#include "common/log.h"
#include "common/syscall.h"
#include "gateway/ca.h"
#include "gateway/worker.h"

namespace space::node {
namespace {

namespace ipc = gateway::ipc;

constexpr int kReadyTimeoutMs = 20000;
constexpr int kStopTimeoutMs = 3000;
constexpr int kMinBackoffMs = 200;
constexpr int kMaxBackoffMs = 10000;
constexpr size_t kRecentUnregistered = 256;
constexpr int kWorkerFd = 3;
constexpr int kAuditPerMin = 60000;

std::string WaitStatusText(int status) {
  if (WIFEXITED(status)) return "exit status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "signal " + std::to_string(WTERMSIG(status));
  return "status " + std::to_string(status);
}

int64_t MonotonicMs() { return MonoNowNs() / 1000000; }

}  // namespace

bool SecretRequestAllowed(const RegisteredSandboxes& registered, const std::string& team, const std::string& name) {
  for (const auto& [address, sandbox] : registered) {
    if (!sandbox || sandbox->team != team) continue;
    for (const auto& c : sandbox->credentials) {
      if (c.spec.name == name) return true;
    }
  }
  return false;
}

int SecretRateLimitPerMin(const RegisteredSandboxes& registered, const std::string& team, const std::string& name) {
  int strictest = 0;
  for (const auto& [address, sandbox] : registered) {
    if (!sandbox || sandbox->team != team) continue;
    for (const auto& c : sandbox->credentials) {
      const int rate = c.spec.rate_limit_per_min;
      if (c.spec.name == name && rate > 0 && (strictest == 0 || rate < strictest)) strictest = rate;
    }
  }
  return strictest;
}

bool AuditOwnerKnown(const RegisteredSandboxes& registered,
                     const std::deque<std::pair<std::string, std::string>>& recent, const std::string& sandbox_id,
                     const std::string& team) {
  for (const auto& [address, sandbox] : registered) {
    if (sandbox && sandbox->sandbox_id == sandbox_id && sandbox->team == team) return true;
  }
  return std::find(recent.begin(), recent.end(), std::make_pair(sandbox_id, team)) != recent.end();
}

Result<std::unique_ptr<GatewayProcess>> GatewayProcess::Start(const gateway::GatewayConfig& given,
                                                              GatewayProcessHooks hooks, uid_t worker_uid) {
  if (worker_uid < gateway::kMinWorkerUid) {
    return InvalidArgument("gateway worker uid " + std::to_string(worker_uid) + " is a system id");
  }
  gateway::GatewayConfig config = given;
  if (hooks.map_ids) {
    // A worker that never runs as root can read neither the CA key (0600 root) nor, maybe,
    // the upstream CA file: both go in its config message instead.
    ASSIGN_OR_RETURN(auto pem, gateway::CertAuthority::LoadOrCreatePem(config.ca_dir));
    config.ca_cert_pem = std::move(pem.first);
    config.ca_key_pem = std::move(pem.second);
    if (!config.upstream_ca_file.empty()) {
      ASSIGN_OR_RETURN(config.upstream_ca_pem, ReadFileToString(config.upstream_ca_file, 256 << 10));
      config.upstream_ca_file.clear();
    }
  }
  // Opened once: a restart execs this binary even if the file was replaced since.
  int exe = ::open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  if (exe < 0) return ErrnoStatus("open", "/proc/self/exe", errno);
  UniqueFd exe_fd(exe);
  int wake = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) return ErrnoStatus("eventfd", "gateway supervisor", errno);
  std::unique_ptr<GatewayProcess> p(
      new GatewayProcess(config, std::move(hooks), worker_uid, std::move(exe_fd), UniqueFd(wake)));
  p->supervisor_ = std::thread([g = p.get()] { g->Supervise(); });
  Status st;
  {
    std::unique_lock<std::mutex> lock(p->mu_);
    p->started_cv_.wait(lock, [&] { return p->started_; });
    st = p->start_status_;
  }
  if (!st.ok()) {
    p->Stop();
    return st;
  }
  return p;
}

GatewayProcess::~GatewayProcess() { Stop(); }

void GatewayProcess::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  uint64_t one = 1;
  (void)!::write(wake_.get(), &one, sizeof one);
  if (supervisor_.joinable() && supervisor_.get_id() != std::this_thread::get_id()) supervisor_.join();
}

network::GatewayPorts GatewayProcess::ports() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ports_;
}

pid_t GatewayProcess::worker_pid() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pid_;
}

void GatewayProcess::Register(in_addr address, std::shared_ptr<const gateway::SandboxEgress> sandbox) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!sandbox) return;
  nlohmann::json fields = {{"address", ipc::AddressText(address)}, {"sandbox", ipc::SandboxJson(*sandbox)}};
  registered_[address.s_addr] = std::move(sandbox);
  // A worker that is down gets the registration when it restarts (SpawnWorker replays).
  if (channel_) {
    if (Status st = channel_->Send(ipc::Type::kRegister, std::move(fields)); !st.ok()) {
      LogWarn("gateway", "register " + ipc::AddressText(address) + ": " + st.ToString());
      DropWedgedWorkerLocked(st);
    }
  }
}

void GatewayProcess::Unregister(in_addr address) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = registered_.find(address.s_addr);
  if (it != registered_.end()) {
    recent_.emplace_back(it->second->sandbox_id, it->second->team);
    if (recent_.size() > kRecentUnregistered) recent_.pop_front();
    registered_.erase(it);
  }
  if (channel_) {
    if (Status st = channel_->Send(ipc::Type::kUnregister, {{"address", ipc::AddressText(address)}}); !st.ok()) {
      LogWarn("gateway", "unregister " + ipc::AddressText(address) + ": " + st.ToString());
      DropWedgedWorkerLocked(st);
    }
  }
}

void GatewayProcess::DropWedgedWorkerLocked(const Status& send_status) {
  // A worker that stops reading is wedged or hostile: shutting the channel down makes the
  // supervisor see EOF, kill it and start another (which gets every registration replayed).
  if (send_status.code() == StatusCode::kDeadlineExceeded && channel_) channel_->Shutdown();
}

Status GatewayProcess::SpawnWorker() {
  UniqueFd mine, theirs;
  RETURN_IF_ERROR(hooks_.socket_pair ? hooks_.socket_pair(&mine, &theirs) : ipc::MakeSocketPair(&mine, &theirs));
  HelperSpec spec;
  spec.args = {"space", "gateway-worker", "--fd", std::to_string(kWorkerFd), "--node-pid", std::to_string(::getpid()),
               "--uid", std::to_string(worker_uid_)};
  spec.fds = {{theirs.get(), kWorkerFd}};
  spec.exe_fd = exe_.get();
  // Not the node's environment: it may hold SPACE_KEK. Only what OpenSSL's trust store reads.
  for (const char* name : {"SSL_CERT_FILE", "SSL_CERT_DIR"}) {
    if (const char* v = ::getenv(name)) spec.env.push_back(std::string(name) + "=" + v);
  }
  if (hooks_.map_ids) spec.user = HelperUser{.uid = worker_uid_, .map_ids = hooks_.map_ids};
  Result<pid_t> spawned = SpawnHelper(spec);
  if (!spawned.ok()) return spawned.status().Annotate("gateway worker");
  const pid_t pid = *spawned;
  theirs.reset();
  auto channel = std::make_shared<ipc::Channel>(std::move(mine), ipc::Sender::kWorker);
  auto fail = [&](const Status& st) {
    int status = 0;
    if (Status k = KillChildPid(hooks_.privileged, pid); k.ok()) {
      RetryEintr([&] { return ::waitpid(pid, &status, 0); });
    } else {
      LogWarn("gateway", k.ToString());  // it ends when its channel closes, with the node
    }
    return Status(st.code(), "gateway worker: " + st.message());
  };
  if (Status st = channel->Send(ipc::Type::kConfig, ipc::ConfigJson(config_)); !st.ok()) return fail(st);
  int64_t deadline = MonotonicMs() + kReadyTimeoutMs;
  Result<ipc::Message> reply = DeadlineExceeded("no ready message");
  for (;;) {
    int64_t left = deadline - MonotonicMs();
    if (left <= 0) return fail(DeadlineExceeded("no ready message within " + std::to_string(kReadyTimeoutMs) + " ms"));
    reply = channel->Receive(static_cast<int>(left), wake_.get());
    if (reply.ok()) break;
    if (reply.status().code() != StatusCode::kDeadlineExceeded) return fail(reply.status());
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return fail(Unavailable("stopping"));
  }
  if (reply->type == ipc::Type::kError) return fail(Unavailable(reply->body["message"].get<std::string>()));
  if (reply->type != ipc::Type::kReady) return fail(Internal("expected ready, got " + std::string(ipc::TypeName(reply->type))));
  network::GatewayPorts ports = ipc::PortsFromJson(reply->body["ports"]);
  const std::string& ca = reply->body["ca_certificate_pem"].get_ref<const std::string&>();

  bool ports_changed = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!started_) {
      ca_certificate_pem_ = ca;
    } else {
      if (ca != ca_certificate_pem_) LogWarn("gateway", "the restarted worker has another CA; sandboxes keep the first");
      ports_changed = ports.dns != ports_.dns || ports.http != ports_.http || ports.tls != ports_.tls ||
                      ports.proxy != ports_.proxy || ports.tcp != ports_.tcp;
    }
    ports_ = ports;
    pid_ = pid;
    channel_ = channel;
    for (const auto& [addr, sandbox] : registered_) {
      in_addr a{};
      a.s_addr = addr;
      Status st = channel->Send(ipc::Type::kRegister,
                                {{"address", ipc::AddressText(a)}, {"sandbox", ipc::SandboxJson(*sandbox)}});
      if (!st.ok()) LogWarn("gateway", "re-register " + ipc::AddressText(a) + ": " + st.ToString());
    }
    if (started_) LogInfo("gateway", "worker pid " + std::to_string(pid) + " serving " +
                                         std::to_string(registered_.size()) + " sandboxes again");
  }
  if (ports_changed && hooks_.ports_changed) hooks_.ports_changed(ports);
  return Status::Ok();
}

std::string GatewayProcess::KillWorker(bool ask_first) {
  std::shared_ptr<ipc::Channel> channel;
  pid_t pid;
  {
    std::lock_guard<std::mutex> lock(mu_);
    channel = std::move(channel_);
    pid = pid_;
    pid_ = 0;
  }
  if (pid <= 0) return "no worker";
  if (ask_first && channel && channel->Send(ipc::Type::kStop, nullptr).ok()) {
    // Wait for the worker to close its end (it stops serving first), at most kStopTimeoutMs.
    int64_t deadline = MonotonicMs() + kStopTimeoutMs;
    for (int64_t left; (left = deadline - MonotonicMs()) > 0;) {
      auto msg = channel->Receive(static_cast<int>(left));
      if (!msg.ok() && msg.status().code() != StatusCode::kInvalidArgument) break;
    }
  }
  if (Status k = KillChildPid(hooks_.privileged, pid); !k.ok()) return "not killed (" + k.ToString() + ")";
  int status = 0;
  if (RetryEintr([&] { return ::waitpid(pid, &status, 0); }) != pid) return "not reaped";
  return WaitStatusText(status);
}

bool GatewayProcess::Backoff(int ms) {
  pollfd pfd = {wake_.get(), POLLIN, 0};
  (void)RetryEintr([&] { return ::poll(&pfd, 1, ms); });
  std::lock_guard<std::mutex> lock(mu_);
  return !stopping_;
}

void GatewayProcess::Supervise() {
  int backoff_ms = kMinBackoffMs;
  int64_t spawned_at = 0;
  for (;;) {
    std::shared_ptr<ipc::Channel> channel;
    bool first;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) break;
      channel = channel_;
      first = !started_;
    }
    if (!channel) {
      Status st = SpawnWorker();
      if (first) {
        std::lock_guard<std::mutex> lock(mu_);
        started_ = true;
        start_status_ = st;
        started_cv_.notify_all();
        if (!st.ok()) return;
        spawned_at = MonotonicMs();
        continue;
      }
      if (!st.ok()) {
        LogError("gateway", "restarting the worker: " + st.ToString());
        if (!Backoff(backoff_ms)) break;
        backoff_ms = std::min(backoff_ms * 2, kMaxBackoffMs);
      }
      spawned_at = MonotonicMs();
      continue;
    }
    auto msg = channel->Receive(-1, wake_.get());
    if (msg.ok()) {
      Handle(*msg);
      continue;
    }
    if (msg.status().code() == StatusCode::kInvalidArgument) {
      LogWarn("gateway", "refused a message from the worker: " + msg.status().message());
      continue;
    }
    if (msg.status().code() == StatusCode::kDeadlineExceeded) continue;  // woken: stopping?
    // The worker is gone (or closed its end): reap it and start another.
    pid_t pid = worker_pid();
    std::string how = KillWorker(false);
    LogError("gateway", "worker pid " + std::to_string(pid) + " died (" + how + ", " + msg.status().message() +
                            "); restarting it and re-registering its sandboxes");
    if (MonotonicMs() - spawned_at > 60000) backoff_ms = kMinBackoffMs;
    if (!Backoff(backoff_ms)) break;
    backoff_ms = std::min(backoff_ms * 2, kMaxBackoffMs);
  }
  KillWorker(true);
}

void GatewayProcess::Handle(const ipc::Message& msg) {
  switch (msg.type) {
    case ipc::Type::kSecretRequest:
      AnswerSecret(msg.body);
      return;
    case ipc::Type::kAudit: {
      const std::string& sandbox_id = msg.body["sandbox_id"].get_ref<const std::string&>();
      const std::string& team = msg.body["team"].get_ref<const std::string&>();
      bool known;
      {
        std::lock_guard<std::mutex> lock(mu_);
        known = AuditOwnerKnown(registered_, recent_, sandbox_id, team);
      }
      if (!known) {
        LogWarn("gateway", "dropped an audit record from the worker for an unknown sandbox");
        return;
      }
      int64_t now = MonotonicMs();
      if (!audit_limiter_.Allow("audit", now, kAuditPerMin)) {
        if (now - audit_drop_logged_ms_ > 60000) {
          LogWarn("gateway", "dropping audit records from the worker beyond " + std::to_string(kAuditPerMin) + "/min");
          audit_drop_logged_ms_ = now;
        }
        return;
      }
      if (hooks_.audit) {
        hooks_.audit(team, sandbox_id, msg.body["kind"].get<std::string>(), msg.body["action"].get<std::string>(),
                     msg.body["detail"]);
      }
      return;
    }
    default:
      LogWarn("gateway", "unexpected " + std::string(ipc::TypeName(msg.type)) + " message from the worker");
  }
}

void GatewayProcess::AnswerSecret(const nlohmann::json& body) {
  const std::string& team = body["team"].get_ref<const std::string&>();
  const std::string& name = body["name"].get_ref<const std::string&>();
  bool allowed;
  int rate_per_min;
  std::shared_ptr<ipc::Channel> channel;
  {
    std::lock_guard<std::mutex> lock(mu_);
    allowed = SecretRequestAllowed(registered_, team, name);
    rate_per_min = SecretRateLimitPerMin(registered_, team, name);
    channel = channel_;
  }
  nlohmann::json reply = {{"id", body["id"]}};
  if (!allowed) {
    LogWarn("gateway", "refused the worker the secret of credential " + name +
                           ": no registered sandbox of its team has it bound");
    reply["error"] = "credential " + name + " is not bound to a registered sandbox of the team";
  } else if (!secret_limiter_.Allow(team + "/" + name, MonotonicMs(), rate_per_min)) {
    // The worker checks the same limit first, so only a worker that lost its count (restarted)
    // or ignores it gets here.
    LogWarn("gateway", "refused the worker the secret of credential " + name + ": over its rate limit");
    reply["error"] = "credential " + name + " is over its rate limit";
  } else if (!hooks_.secret) {
    reply["error"] = "no secrets on this node";
  } else {
    auto secret = hooks_.secret(team, name);
    if (secret.ok()) {
      reply["secret"] = *secret;
      std::fill(secret->begin(), secret->end(), '\0');
    } else {
      reply["error"] = secret.status().ToString().substr(0, 4000);
    }
  }
  if (!channel) return;
  if (Status st = channel->Send(ipc::Type::kSecretReply, std::move(reply)); !st.ok()) {
    LogWarn("gateway", "secret reply: " + st.ToString());
    if (st.code() == StatusCode::kDeadlineExceeded) channel->Shutdown();
  }
}

}  // namespace space::node
