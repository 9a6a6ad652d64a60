// `space team create|ls` and `space key create|ls|rm|self`: teams and API keys
// (api: /v1/teams, /v1/keys; docs/keys.md). All but `key self` need an admin key.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/client.h"

namespace space::cli {

class KeyCommands {
 public:
  void Register(CLI::App& app);
  // The exit code when one of these commands was given; nullopt otherwise.
  std::optional<int> Run(Client& c, bool json);

 private:
  CLI::App* team_create_ = nullptr;
  CLI::App* team_ls_ = nullptr;
  CLI::App* key_create_ = nullptr;
  CLI::App* key_ls_ = nullptr;
  CLI::App* key_rm_ = nullptr;
  CLI::App* key_self_ = nullptr;
  std::string name_;
  std::string team_;
  std::string id_;
  std::string expires_at_;
  std::vector<std::string> scopes_;
};

}  // namespace space::cli
