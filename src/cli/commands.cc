#include "cli/commands.h"

#include <CLI/CLI.hpp>
#include <iostream>

#include "cli/client.h"
#include "cli/egress_commands.h"
#include "cli/fleet_commands.h"
#include "cli/key_commands.h"
#include "cli/port_commands.h"
#include "cli/sandbox_commands.h"
#include "cli/volume_commands.h"
#include "daemon/dev.h"
#include "daemon/hidden_commands.h"

namespace space::cli {
namespace {

int Fail(const Status& st) {
  std::cerr << "space: " << st.message() << "\n";
  return 1;
}

// `space dev`'s flags, into `dev`.
CLI::App* RegisterDev(CLI::App& app, daemon::DevOptions* dev) {
  auto* cmd = app.add_subcommand("dev", "run the all-in-one server on this machine");
  cmd->add_option("--listen", dev->listen, "ADDR:PORT (port 0 picks a free one)");
  cmd->add_option("--data-dir", dev->data_dir, "state directory");
  cmd->add_option("--store", dev->store,
                  "store URL: a SQLite path or sqlite://PATH, or postgres://USER:PASS@HOST:PORT/DB "
                  "(default: SQLite at <data-dir>/state.db)");
  cmd->add_option("--guest", dev->guest_binary, "path of the static spaced binary");
  cmd->add_option("--object-store", dev->object_store,
                  "snapshot store in S3: s3://BUCKET/PREFIX?endpoint=URL&region=REGION (default: <data-dir>/store)");
  cmd->add_option("--object-store-credentials", dev->object_store_credentials,
                  "JSON file {access_key_id, secret_access_key}, mode 0600 (default: AWS_ACCESS_KEY_ID and "
                  "AWS_SECRET_ACCESS_KEY)");
  cmd->add_flag("--overlay", dev->force_overlay,
                "use overlayfs instead of btrfs for sandbox roots (refused today: overlayfs cannot be idmapped)");
  cmd->add_option("--api-rate-limit", dev->api_rate_limit,
                  "requests per second per API key, RATE[:BURST] (default 1000:2000; 0 = off)");
  cmd->add_option("--preview-domain", dev->preview_domain,
                  "domain of preview URLs, <port>-<sandbox label>.DOMAIN on this listener (default localhost, "
                  "which browsers resolve to loopback)");
  cmd->add_option("--warm-pool", dev->warm_pool,
                  "pre-created sandboxes per template and runtime, TEMPLATE[:vm]=N[,...] (default: none)");
  cmd->add_flag("--no-egress", dev->no_egress, "no sandbox network at all (egress profiles are refused)");
  cmd->add_option("--accel", dev->accel,
                  "what runs vm sandboxes: auto (KVM when a guest boots under it, else TCG), kvm (try KVM even where "
                  "/dev/kvm's mode says the VMM cannot open it; TCG if the guest does not boot), tcg");
  cmd->add_option("--import-root", dev->import_root,
                  "directory template imports may read, resolved as their root (default /: anywhere)");
  cmd->add_option("--trusted-template-source", dev->trusted_template_sources,
                  "directory template imports may read (repeatable; instead of --import-root)");
  cmd->add_option("--egress-dns", dev->egress_dns, "resolver the egress gateway asks (IP[:PORT]; default: resolv.conf)");
  cmd->add_option("--egress-upstream-ca", dev->egress_upstream_ca,
                  "extra CA certificate file the gateway trusts for upstream TLS");
  return cmd;
}

}  // namespace

int Main(int argc, char** argv) {
  // The helpers the node starts by re-executing this binary, before any parsing.
  if (auto code = daemon::RunHiddenCommand(argc, argv)) return *code;

  CLI::App app{"SPACE: sandboxes for agentic code execution"};
  app.require_subcommand(1);
  bool json = false;
  app.add_flag("--json", json, "machine-readable output");
  daemon::DevOptions dev;
  CLI::App* dev_cmd = RegisterDev(app, &dev);
  SandboxCommands sandbox_commands;
  sandbox_commands.Register(app);
  EgressCommands egress_commands;
  egress_commands.Register(app);
  FleetCommands fleet_commands;
  fleet_commands.Register(app);
  PortCommands port_commands;
  port_commands.Register(app);
  VolumeCommands volume_commands;
  volume_commands.Register(app);
  KeyCommands key_commands;
  key_commands.Register(app);

  CLI11_PARSE(app, argc, argv);

  if (dev_cmd->parsed()) return daemon::RunDev(dev);
  if (auto code = fleet_commands.RunDaemon()) return *code;

  auto client = Client::FromEnv();
  if (!client.ok()) return Fail(client.status());
  if (auto code = egress_commands.Run(*client, json)) return *code;
  if (auto code = fleet_commands.Run(*client, json)) return *code;
  if (auto code = port_commands.Run(*client, json)) return *code;
  if (auto code = volume_commands.Run(*client, json)) return *code;
  if (auto code = key_commands.Run(*client, json)) return *code;
  if (auto code = sandbox_commands.Run(*client, json)) return *code;
  return 2;
}

}  // namespace space::cli
