// `space port open|ls|close`: a sandbox's preview ports (api: /v1/sandboxes/{id}/ports).
#pragma once

#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "cli/client.h"

namespace space::cli {

class PortCommands {
 public:
  void Register(CLI::App& app);
  // The exit code when one of these commands was given; nullopt otherwise.
  std::optional<int> Run(Client& c, bool json);

 private:
  CLI::App* open_ = nullptr;
  CLI::App* ls_ = nullptr;
  CLI::App* close_ = nullptr;
  std::string id_;
  int port_ = 0;
  bool public_ = false;
  bool auto_resume_ = false;
};

}  // namespace space::cli
