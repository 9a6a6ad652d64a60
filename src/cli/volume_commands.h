// `space volume create|ls|rm|fork`: a team's volumes (api: /v1/volumes).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "cli/client.h"

namespace space::cli {

class VolumeCommands {
 public:
  void Register(CLI::App& app);
  // The exit code when one of these commands was given; nullopt otherwise.
  std::optional<int> Run(Client& c, bool json);

 private:
  CLI::App* create_ = nullptr;
  CLI::App* ls_ = nullptr;
  CLI::App* rm_ = nullptr;
  CLI::App* fork_ = nullptr;
  std::string name_;
  std::string new_name_;
  int64_t size_mb_ = 1024;
};

}  // namespace space::cli
