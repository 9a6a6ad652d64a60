// LiveSandbox: what the node holds for one booted sandbox: its guest channel, its processes,
// its runtime and its network attachment. Internal to src/node; kept in LiveSandboxes.
#pragma once

#include <netinet/in.h>
#include <sys/types.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "node/guest_client.h"
#include "node/process.h"
#include "runtime/runtime.h"

namespace space::node {

struct LiveSandbox {
  std::string id;
  std::string team;
  int64_t uid_slot = -1;
  std::atomic<int64_t> expires_at_ms{0};
  std::atomic<int64_t> last_rolling_ms{0};  // when the rolling policy last took a snapshot
  int64_t rolling_every_ms = 0;             // from the sandbox's snapshot policy; 0 = none
  std::unique_ptr<GuestClient> guest;
  pid_t init_pid = -1;                  // host pid of spaced (vm: of its VMM)
  runtime::Runtime* runtime = nullptr;  // the node's ns or vm runtime, whichever runs it
  // Environment every process gets below its own request's env. Empty for a cold boot (the
  // sandbox's env is spaced's own environment then); a warm-pool sandbox gets its create's
  // env here, since its spaced started before the create existed.
  std::map<std::string, std::string> base_env;
  int64_t booted_mono_ns = 0;  // when its init started (for CPU use since boot)
  std::mutex usage_mu;
  uint64_t last_cpu_ns = 0;    // GUARDED_BY(usage_mu): CPU time at the previous sample
  int64_t last_sample_ns = 0;  // GUARDED_BY(usage_mu)
  bool egress = false;         // joined to the gateway (has a veth)
  in_addr egress_address{};    // its address, as the gateway knows it

  std::mutex mu;
  std::map<std::string, std::shared_ptr<Process>> processes;  // GUARDED_BY(mu)
};

// The environment that points TLS runtimes with their own trust stores at the gateway's CA
// (added to the system bundle at boot) in sandboxes with egress.
inline constexpr std::pair<const char*, const char*> kEgressTrustEnv[] = {
    {"SSL_CERT_FILE", "/etc/ssl/certs/ca-certificates.crt"},
    {"REQUESTS_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt"},
    {"NODE_EXTRA_CA_CERTS", "/etc/ssl/certs/space-gateway-ca.pem"},
};

}  // namespace space::node
