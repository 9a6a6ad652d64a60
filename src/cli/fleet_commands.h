// Fleet commands: `space server` (a control-plane replica) and `space node` (a node agent),
// whose flags this parses and whose runs are src/daemon's; and the operator's
// `space node ls|drain|ready` against a server, and `space node prepare` (daemon/node_prepare.h).
#pragma once

#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "cli/client.h"
#include "daemon/dev.h"
#include "daemon/server.h"

namespace space::cli {

class FleetCommands {
 public:
  void Register(CLI::App& app);
  // Runs `space server` or `space node` (no client needed); nullopt when neither was given.
  std::optional<int> RunDaemon();
  // The exit code when an operator command was given; nullopt otherwise.
  std::optional<int> Run(Client& c, bool json);

 private:
  daemon::ServerOptions server_;
  daemon::DevOptions node_;
  CLI::App* server_cmd_ = nullptr;
  CLI::App* node_cmd_ = nullptr;
  CLI::App* node_ls_ = nullptr;
  CLI::App* node_drain_ = nullptr;
  CLI::App* node_ready_ = nullptr;
  CLI::App* node_prepare_ = nullptr;
  std::string name_;
};

}  // namespace space::cli
