// GatewayProcess: the node's handle on its egress gateway, which runs in an unprivileged
// child process (`space gateway-worker`, gateway/worker.h) so that parsing raw sandbox traffic
// never happens as root. It offers what gateway::Gateway offered in process (Register,
// Unregister, ports, CA certificate, Stop) and speaks gateway/ipc.h to the worker.
//
// The worker is untrusted once it has seen sandbox traffic. So the node answers a secret
// request only for a credential bound to a sandbox of that team that is registered right now
// (SecretRequestAllowed), and records an audit event only for a sandbox it registered
// (AuditOwnerKnown); Decode bounds every field.
//
// A supervisor thread, the only one that forks the worker (PR_SET_PDEATHSIG follows the
// forking thread, and this one lives as long as the object), reads the worker's messages and
// restarts a worker that dies, re-registering every live sandbox. The worker is re-executed
// from /proc/self/exe (opened at Start) rather than forked and continued, since the node is
// multithreaded. Owned by the Node; thread-safe.
#pragma once

#include <netinet/in.h>
#include <sys/types.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include <nlohmann/json.hpp>

#include "common/privileged_acts.h"
#include "common/result.h"
#include "common/unique_fd.h"
#include "credentials/credential.h"
#include "gateway/gateway.h"
#include "gateway/ipc.h"
#include "network/firewall.h"

namespace space::node {

using RegisteredSandboxes = std::map<in_addr_t, std::shared_ptr<const gateway::SandboxEgress>>;

// Whether the node may hand the worker the secret of credential `name` of `team`: only when
// some sandbox registered now belongs to `team` and has `name` bound.
bool SecretRequestAllowed(const RegisteredSandboxes& registered, const std::string& team, const std::string& name);

// The rate limit (per minute, 0 = none) the node holds the worker's secret requests for
// credential `name` of `team` to: the strictest among the registered sandboxes that bind it.
// The worker enforces the same limit before asking; the node's count survives a worker
// restart, which starts the worker's own from zero.
int SecretRateLimitPerMin(const RegisteredSandboxes& registered, const std::string& team, const std::string& name);

// Whether an audit record naming (sandbox_id, team) comes from a sandbox registered now or
// among `recent` (unregistered lately; a connection may outlive its sandbox's registration).
bool AuditOwnerKnown(const RegisteredSandboxes& registered,
                     const std::deque<std::pair<std::string, std::string>>& recent, const std::string& sandbox_id,
                     const std::string& team);

struct GatewayProcessHooks {
  // The unsealed secret of credential `name` of `team` (asked only after SecretRequestAllowed).
  std::function<Result<std::string>(const std::string& team, const std::string& name)> secret;
  // One validated audit record from the worker.
  std::function<void(const std::string& team, const std::string& sandbox_id, const std::string& kind,
                     const std::string& action, nlohmann::json detail)>
      audit;
  // A restarted worker listens on other ports than its predecessor (its fixed ports were
  // taken meanwhile); the firewall must follow. Optional.
  std::function<void(const network::GatewayPorts& ports)> ports_changed;
  // Makes the node-worker socketpair (node end, worker end) with send buffers of
  // ipc::kSocketBufferBytes. Optional: ipc::MakeSocketPair, whose buffers wmem_max caps
  // unless the node has CAP_NET_ADMIN.
  std::function<Status(UniqueFd* node_end, UniqueFd* worker_end)> socket_pair;
  // Writes the id maps of a worker started in a user namespace of its own (HelperUser):
  // then the worker never runs as root, and gets the CA as PEM text in its config. Optional:
  // without it the worker starts as root and drops to its uid itself.
  std::function<Status(int pidfd, pid_t pid)> map_ids;
  // Who kills the worker when the node may not (it runs under another uid): the broker.
  // Optional: kills are sent from here.
  PrivilegedActs* privileged = nullptr;
};

class GatewayProcess {
 public:
  // Starts the worker and waits until it listens (or failed to start). It runs as
  // `worker_uid` (>= gateway::kMinWorkerUid), which the caller keeps for it alone.
  static Result<std::unique_ptr<GatewayProcess>> Start(const gateway::GatewayConfig& config,
                                                       GatewayProcessHooks hooks, uid_t worker_uid);
  ~GatewayProcess();
  // Stops the worker (asks, then kills) and the supervisor. Idempotent.
  void Stop();

  network::GatewayPorts ports() const;
  // The CA certificate sandboxes trust; fixed at Start.
  const std::string& ca_certificate_pem() const { return ca_certificate_pem_; }

  // Valid until Stop. Kept here and replayed to a restarted worker.
  void Register(in_addr address, std::shared_ptr<const gateway::SandboxEgress> sandbox);
  void Unregister(in_addr address);

  // The worker's pid now (0 while it is being restarted). For tests and logs.
  pid_t worker_pid() const;

 private:
  GatewayProcess(const gateway::GatewayConfig& config, GatewayProcessHooks hooks, uid_t worker_uid, UniqueFd exe,
                 UniqueFd wake)
      : config_(config), hooks_(std::move(hooks)), worker_uid_(worker_uid), exe_(std::move(exe)),
        wake_(std::move(wake)) {}

  void Supervise();
  // Forks and execs a worker, hands it the config, waits for ready and replays registrations.
  Status SpawnWorker();
  // Stops the worker (with a stop message first when ask_first) and reaps it: how it ended.
  std::string KillWorker(bool ask_first);
  void DropWedgedWorkerLocked(const Status& send_status);  // mu_ held
  void Handle(const gateway::ipc::Message& msg);
  void AnswerSecret(const nlohmann::json& body);
  // Sleeps up to ms, or until Stop. False when stopping.
  bool Backoff(int ms);

  const gateway::GatewayConfig config_;
  const GatewayProcessHooks hooks_;
  const uid_t worker_uid_;
  const UniqueFd exe_;   // /proc/self/exe, for fexecve
  const UniqueFd wake_;  // eventfd: Stop wakes the supervisor
  std::string ca_certificate_pem_;  // set before Start returns, then immutable
  std::thread supervisor_;
  // Supervisor thread only: a flood of audit records from a compromised worker is cut at
  // kAuditPerMin, so it cannot fill the node's store.
  credentials::RateLimiter audit_limiter_;
  // Supervisor thread only: secret requests per team/credential (SecretRateLimitPerMin).
  credentials::RateLimiter secret_limiter_;
  int64_t audit_drop_logged_ms_ = 0;

  mutable std::mutex mu_;
  std::condition_variable started_cv_;
  bool started_ = false;                                     // GUARDED_BY(mu_)
  Status start_status_;                                      // GUARDED_BY(mu_)
  bool stopping_ = false;                                    // GUARDED_BY(mu_)
  pid_t pid_ = 0;                                            // GUARDED_BY(mu_)
  std::shared_ptr<gateway::ipc::Channel> channel_;           // GUARDED_BY(mu_)
  network::GatewayPorts ports_;                              // GUARDED_BY(mu_)
  RegisteredSandboxes registered_;                           // GUARDED_BY(mu_)
  std::deque<std::pair<std::string, std::string>> recent_;  // (sandbox_id, team); GUARDED_BY(mu_)
};

}  // namespace space::node
