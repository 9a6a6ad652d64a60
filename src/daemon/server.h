// `space server`: one stateless replica of a fleet's control plane (docs/fleet.md). Serves the
// v1 API by routing each request to the node that owns it (controlplane/router.h) and runs
// the controllers (lost nodes, drain jobs). Needs no root: it touches no sandbox itself, and
// started as root it becomes --user (all capabilities gone) before it serves a request.
#pragma once

#include <cstdint>
#include <string>

namespace space::daemon {

struct ServerOptions {
  std::string listen = "127.0.0.1:7720";
  std::string store;             // the fleet's shared store (postgres://...); required
  std::string fleet_token_file;  // the fleet's shared secret; required
  std::string replica;           // name in job leases; default <hostname>-<pid>
  std::string api_rate_limit = "1000:2000";
  int64_t lost_after_ms = 15000;  // a node silent this long (15 heartbeats) is lost
  int64_t job_lease_ms = 300000;  // a job whose holder stops renewing this long is taken over
  std::string user = "nobody";   // started as root: the user it becomes before serving
  std::string preview_domain = "localhost";  // preview hosts relayed to their sandbox's node
};

int RunServer(const ServerOptions& options);

}  // namespace space::daemon
