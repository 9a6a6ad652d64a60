// Ports: a sandbox's preview ports. Opening a port records it (with a token unless it is
// public) and gives its URL, `http://<port>-<host label>.<preview domain>[:<listen port>]/`;
// the ingress (ingress/ingress.h) resolves such a host back to the sandbox and the port, and
// reaches the port through the sandbox's guest channel (node/tcp_tunnel.h), never through a
// network route into the sandbox. Closing a port ends its open connections at once.
//
// Limits: requests per second per sandbox (a token bucket), open connections per port.
// Opens and closes go to the audit; each port counts its requests and connections.
//
// Owned by the Node; borrows the store, the live table, the audit log and the lifecycle (a
// port with auto_resume resumes its paused or suspended sandbox). Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "common/result.h"
#include "node/audit_log.h"
#include "node/live_sandboxes.h"
#include "node/tcp_tunnel.h"
#include "store/store.h"

namespace space::node {

class Lifecycle;

struct PortsConfig {
  std::string domain = "localhost";  // --preview-domain
  uint16_t listen_port = 0;          // in URLs unless 80
  double requests_per_s = 100;       // per sandbox, sustained
  double burst = 400;
  int64_t max_connections_per_port = 64;
};

struct PortView {
  int64_t port = 0;  // 0: every port (an E2B sandbox's)
  bool is_public = false;
  bool auto_resume = false;
  int64_t created_at_ms = 0;
  std::string url;
  int64_t connections = 0;  // open now
  uint64_t requests = 0;    // since the node started
};

struct OpenedPort {
  PortView view;
  std::string token;  // shown once; "" for a public port
};

// One open preview connection: its tunnel, counted against its port until it goes away.
class PreviewConnection {
 public:
  PreviewConnection(std::shared_ptr<TcpTunnel> tunnel, std::function<void()> release)
      : tunnel_(std::move(tunnel)), release_(std::move(release)) {}
  ~PreviewConnection();
  TcpTunnel& tunnel() { return *tunnel_; }

 private:
  std::shared_ptr<TcpTunnel> tunnel_;
  std::function<void()> release_;
};

class Ports {
 public:
  Ports(store::Store* store, LiveSandboxes* live, AuditLog* audit, Lifecycle* lifecycle, PortsConfig config)
      : store_(store), live_(live), audit_(audit), lifecycle_(lifecycle), config_(std::move(config)) {}

  // The DNS label that names sandbox `id` in preview hosts (api::SandboxHostLabel).
  static std::string HostLabel(const std::string& id);
  std::string Url(const std::string& id, int64_t port) const;
  const PortsConfig& config() const { return config_; }
  void set_listen_port(uint16_t port) { config_.listen_port = port; }

  // `port` 1..65535, or 0 (every port; `is_public` only). Opening an open port again replaces
  // it (a new token). Valid for a sandbox that is not ended.
  Result<OpenedPort> Open(const std::string& team, const std::string& id, int64_t port, bool is_public,
                          bool auto_resume);
  Result<std::vector<PortView>> List(const std::string& team, const std::string& id);
  // Ends the port's open connections too.
  Status Close(const std::string& team, const std::string& id, int64_t port);

  // Ingress. The sandbox named by `label` (HostLabel, or an E2B host's lowercased id) and its
  // opened `port`: not_found when either is missing.
  struct Target {
    store::Sandbox sandbox;
    store::PortRecord port;  // the exact port's record, or the every-port one
    int64_t requested_port = 0;
  };
  Result<Target> Resolve(const std::string& label, int64_t port);
  // True when `presented` is the port's token (constant time); a public port needs none.
  static bool TokenMatches(const store::PortRecord& port, const std::string& presented);
  // One request against the sandbox's rate: resource_exhausted when over it.
  Status Admit(const std::string& sandbox_id);
  // A connection to the target's port in the sandbox: waits for a paused or suspended sandbox
  // to resume when the port says auto_resume (else unavailable, saying which state it is in);
  // resource_exhausted at the port's connection limit. Returns as soon as the guest was asked
  // to connect: a refusal (nothing listens) is the tunnel's first Read error.
  Result<std::unique_ptr<PreviewConnection>> Connect(const Target& target);

 private:
  struct PortKey {
    std::string sandbox;
    int64_t port;
    bool operator<(const PortKey& o) const { return sandbox != o.sandbox ? sandbox < o.sandbox : port < o.port; }
  };
  struct Counters {
    int64_t connections = 0;
    uint64_t requests = 0;
    std::set<std::shared_ptr<TcpTunnel>> tunnels;  // open now, ended by Close
  };
  struct Bucket {
    double tokens = 0;
    int64_t at_ns = 0;
  };

  Result<std::vector<store::PortRecord>> PortsOf(const std::string& id);  // mu_ not held
  Status WaitRunning(const Target& target, store::Sandbox* now);
  PortView View(const store::PortRecord& r);  // mu_ held

  store::Store* const store_;
  LiveSandboxes* const live_;
  AuditLog* const audit_;
  Lifecycle* const lifecycle_;
  PortsConfig config_;

  std::mutex mu_;
  std::map<std::string, std::string> labels_;                    // label -> id; GUARDED_BY(mu_)
  std::map<std::string, std::vector<store::PortRecord>> cache_;  // id -> ports; GUARDED_BY(mu_)
  std::map<PortKey, Counters> counters_;                         // GUARDED_BY(mu_)
  std::map<std::string, Bucket> buckets_;                        // GUARDED_BY(mu_)
};

}  // namespace space::node
