// `space dev`: the all-in-one server (API + node + store + local pool) on one machine. The store
// is SQLite in the data dir unless --store names another (a PostgreSQL URL).
#pragma once

#include <string>

namespace space::cli {

struct DevOptions {
  std::string listen = "127.0.0.1:7722";  // ADDR:PORT; port 0 picks a free port
  std::string data_dir = "/var/lib/space";
  std::string store;                      // store URL (store/open_store.h); "" = <data_dir>/state.db
  std::string guest_binary;               // default: spaced next to this binary
  bool force_overlay = false;
  bool no_egress = false;                 // sandboxes get loopback only; egress profiles refused
  std::string egress_dns;                 // upstream resolver of the gateway ("ip[:port]")
  std::string egress_upstream_ca;         // extra CA file the gateway trusts upstream (tests)
  std::string warm_pool;                  // "TEMPLATE=N[,...]": pre-created sandboxes per template
  std::string api_rate_limit = "1000:2000";  // per API key: "RATE[:BURST]" requests/s; "0" = off
};

// Runs until SIGINT/SIGTERM. Returns the process exit code.
int RunDev(const DevOptions& options);

}  // namespace space::cli
