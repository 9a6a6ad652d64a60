// The sandbox and template commands of `space`: create, ls, inspect, rm, logs, exec, cp,
// pause, resume, suspend, snapshot, snapshots, fork, rollback, diff, template ls|build|import|rm,
// each one call (or one stream) of the v1 API (docs/openapi.yaml).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/client.h"
#include "cli/template_commands.h"

namespace space::cli {

class SandboxCommands {
 public:
  void Register(CLI::App& app);
  // The exit code when one of these commands was given; nullopt otherwise.
  std::optional<int> Run(Client& c, bool json);

 private:
  int Create(Client& c, bool json);
  int Exec(Client& c);
  int Copy(Client& c);
  int BuildTemplate(Client& c);

  CLI::App* create_ = nullptr;
  CLI::App* ls_ = nullptr;
  CLI::App* inspect_ = nullptr;
  CLI::App* rm_ = nullptr;
  CLI::App* logs_ = nullptr;
  CLI::App* exec_ = nullptr;
  CLI::App* cp_ = nullptr;
  CLI::App* pause_ = nullptr;
  CLI::App* resume_ = nullptr;
  CLI::App* suspend_ = nullptr;
  CLI::App* snapshot_ = nullptr;
  CLI::App* snapshots_ = nullptr;
  CLI::App* fork_ = nullptr;
  CLI::App* rollback_ = nullptr;
  CLI::App* diff_ = nullptr;
  CLI::App* tpl_ls_ = nullptr;
  CLI::App* tpl_build_ = nullptr;
  CLI::App* tpl_import_ = nullptr;
  CLI::App* tpl_rm_ = nullptr;
  CLI::App* tpl_gc_ = nullptr;
  RecipeBuildOptions recipe_;
  bool force_ = false;

  std::string template_ = "base", runtime_ = "ns", id_, src_, dst_, name_;
  int64_t timeout_ = 0;
  std::vector<std::string> env_, meta_, cmd_;
  bool no_wait_ = false;
  std::vector<std::string> egress_profiles_, creds_, volumes_;
  std::string user_, cwd_;
  std::string snap_, label_, against_;
  int count_ = 1;
};

}  // namespace space::cli
