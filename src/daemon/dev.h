// `space dev`: the all-in-one server (API + node + store + local pool) on one machine. The store
// is SQLite in the data dir unless --store names another (a PostgreSQL URL).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"

namespace space::daemon {

struct DevOptions {
  std::string listen = "127.0.0.1:7722";  // ADDR:PORT; port 0 picks a free port
  std::string data_dir = "/var/lib/space";
  std::string store;                      // store URL (store/open_store.h); "" = <data_dir>/state.db
  std::string guest_binary;               // default: spaced next to this binary
  bool force_overlay = false;
  std::string import_root = "/";          // template imports (POST /v1/templates "source") read only inside it
  // --trusted-template-source DIR (repeatable): imports read only below one of them; replaces
  // --import-root (giving both is refused).
  std::vector<std::string> trusted_template_sources;
  bool no_egress = false;                 // sandboxes get loopback only; egress profiles refused
  std::string egress_dns;                 // upstream resolver of the gateway ("ip[:port]")
  std::string egress_upstream_ca;         // extra CA file the gateway trusts upstream (tests)
  std::string warm_pool;                  // "TEMPLATE=N[,...]": pre-created sandboxes per template
  std::string accel = "auto";             // vm runtime accelerator: auto, kvm or tcg
  std::string preview_domain = "localhost";  // preview URLs: <port>-<label>.<this>
  int preview_port = 0;                      // the port they name; 0 = the listen port
  std::string api_rate_limit = "1000:2000";  // per API key: "RATE[:BURST]" requests/s; "0" = off
  // Fleet node (`space node`, docs/fleet.md): set by the node command, empty for `space dev`.
  std::string node_name;                  // name in the store's nodes table and sandbox records
  std::string advertise;                  // URL servers reach this node at; default http://<listen>
  int64_t capacity = 256;                 // sandboxes this node accepts in all
  std::string fleet_token_file;           // the fleet's shared secret (authenticator.h)
  std::string snapshot_store;             // shared snapshot store directory; default <data-dir>/store
  // Snapshot store in an S3 bucket instead: s3://BUCKET/PREFIX?endpoint=URL&region=R, keys from
  // AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or a 0600 JSON file (snapshot/s3_location.h).
  std::string object_store;
  std::string object_store_credentials;
};

// Runs until SIGINT/SIGTERM. Returns the process exit code. With `node_name` set, runs as a
// fleet node: the store must be shared (PostgreSQL), and the node heartbeats into it.
int RunDev(const DevOptions& options);

// "ADDR:PORT" -> address and port (0 = pick a free one); false when malformed.
bool ParseListen(const std::string& listen, std::string* address, uint16_t* port);

// The fleet token from `path` (trailing whitespace dropped); at least 32 characters.
Result<std::string> ReadFleetToken(const std::string& path);

}  // namespace space::daemon
