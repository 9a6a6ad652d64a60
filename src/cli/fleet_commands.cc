#include "cli/fleet_commands.h"

#include <cstdio>
#include <iostream>

#include "daemon/node_prepare.h"

namespace space::cli {
namespace {

int Fail(const std::string& message) {
  std::cerr << "space: " << message << "\n";
  return 1;
}

}  // namespace

void FleetCommands::Register(CLI::App& app) {
  server_cmd_ = app.add_subcommand("server", "run a stateless control-plane replica of a fleet");
  server_cmd_->add_option("--listen", server_.listen, "ADDR:PORT (port 0 picks a free one)");
  server_cmd_->add_option("--store", server_.store, "the fleet's shared store, postgres://...")->required();
  server_cmd_->add_option("--fleet-token-file", server_.fleet_token_file, "file holding the fleet's shared secret")
      ->required();
  server_cmd_->add_option("--user", server_.user, "the user a server started as root becomes (default nobody)");
  server_cmd_->add_option("--replica", server_.replica, "this replica's name in job leases (default host-pid)");
  server_cmd_->add_option("--api-rate-limit", server_.api_rate_limit, "per API key, RATE[:BURST] (0 = off)");
  server_cmd_->add_option("--lost-after-ms", server_.lost_after_ms, "a node silent this long is lost (default 15000)");
  server_cmd_->add_option("--preview-domain", server_.preview_domain,
                          "domain of preview URLs; such hosts are relayed to the sandbox's node (default localhost)");
  server_cmd_->add_option("--job-lease-ms", server_.job_lease_ms,
                          "a job whose replica stops renewing its lease this long is taken over (default 300000)");

  node_cmd_ = app.add_subcommand("node", "run a fleet node agent, or manage nodes (ls, drain, ready)");
  node_cmd_->add_option("--name", node_.node_name, "this node's name in the fleet");
  node_cmd_->add_option("--listen", node_.listen, "ADDR:PORT the node's API listens on");
  node_cmd_->add_option("--advertise", node_.advertise, "URL servers reach this node at (default http://<listen>)");
  node_cmd_->add_option("--data-dir", node_.data_dir, "this node's own state directory");
  node_cmd_->add_option("--store", node_.store, "the fleet's shared store, postgres://...");
  node_cmd_->add_option("--fleet-token-file", node_.fleet_token_file, "file holding the fleet's shared secret");
  node_cmd_->add_option("--snapshot-store", node_.snapshot_store, "snapshot store directory shared by the fleet");
  node_cmd_->add_option("--object-store", node_.object_store,
                        "the fleet's snapshot store in S3 instead: s3://BUCKET/PREFIX?endpoint=URL&region=REGION");
  node_cmd_->add_option("--object-store-credentials", node_.object_store_credentials,
                        "JSON file {access_key_id, secret_access_key}, mode 0600 (default: AWS_* environment)");
  node_cmd_->add_option("--capacity", node_.capacity, "sandboxes this node accepts in all (default 256)");
  node_cmd_->add_option("--guest", node_.guest_binary, "path of the static spaced binary");
  node_cmd_->add_option("--import-root", node_.import_root,
                        "directory template imports may read, resolved as their root (default /: anywhere)");
  node_cmd_->add_option("--trusted-template-source", node_.trusted_template_sources,
                        "directory template imports may read (repeatable; instead of --import-root)");
  node_cmd_->add_option("--warm-pool", node_.warm_pool,
                        "pre-created sandboxes per template and runtime, TEMPLATE[:vm]=N[,...]");
  node_cmd_->add_flag("--no-egress", node_.no_egress, "no sandbox network at all");
  node_cmd_->add_option("--preview-domain", node_.preview_domain, "domain of preview URLs (the servers' own)");
  node_cmd_->add_option("--preview-port", node_.preview_port,
                        "port preview URLs name: the servers' (default: this node's listen port)");
  node_cmd_->add_option("--accel", node_.accel, "what runs vm sandboxes: auto, kvm or tcg (see space dev --help)");
  node_cmd_->add_option("--egress-dns", node_.egress_dns, "resolver the egress gateway asks (IP[:PORT])");
  node_ls_ = node_cmd_->add_subcommand("ls", "list the fleet's nodes (through a server)");
  node_drain_ = node_cmd_->add_subcommand("drain", "move a node's sandboxes elsewhere and take it out of scheduling");
  node_drain_->add_option("name", name_)->required();
  node_ready_ = node_cmd_->add_subcommand("ready", "put a drained node back into scheduling");
  node_ready_->add_option("name", name_)->required();
  node_prepare_ = node_cmd_->add_subcommand(
      "prepare",
      "fetch what vm sandboxes need (the guest kernel, from apt) before the node runs without a route to it");
}

std::optional<int> FleetCommands::RunDaemon() {
  if (server_cmd_->parsed()) return daemon::RunServer(server_);
  if (node_prepare_->parsed()) return daemon::RunNodePrepare();
  if (!node_cmd_->parsed() || node_ls_->parsed() || node_drain_->parsed() || node_ready_->parsed()) return std::nullopt;
  if (node_.node_name.empty()) return Fail("space node: --name is required to run a node agent");
  return daemon::RunDev(node_);
}

std::optional<int> FleetCommands::Run(Client& c, bool json) {
  Result<Response> r = InvalidArgument("no command");
  if (node_ls_->parsed()) {
    r = c.Call("GET", "/v1/nodes");
  } else if (node_drain_->parsed() || node_ready_->parsed()) {
    r = c.Call("POST", "/v1/nodes/" + UrlEncode(name_) + (node_drain_->parsed() ? "/drain" : "/ready"), "{}");
  } else {
    return std::nullopt;
  }
  if (!r.ok()) return Fail(r.status().message());
  if (r->status >= 300) return Fail(ResponseError(*r).message());
  auto j = nlohmann::json::parse(r->body, nullptr, false);
  if (json || j.is_discarded() || !node_ls_->parsed()) {
    std::cout << (j.is_discarded() ? r->body : j.dump(2)) << "\n";
    return 0;
  }
  std::printf("%-16s %-9s %5s %8s %-24s %s\n", "NAME", "STATE", "LIVE", "CAPACITY", "HEARTBEAT", "URL");
  for (const auto& n : j["nodes"]) {
    std::printf("%-16s %-9s %5lld %8lld %-24s %s\n", n.value("name", "").c_str(), n.value("state", "").c_str(),
                static_cast<long long>(n.value("live", int64_t{0})), static_cast<long long>(n.value("capacity", int64_t{0})),
                n.value("heartbeat_at", "").c_str(), n.value("url", "").c_str());
  }
  return 0;
}

}  // namespace space::cli
