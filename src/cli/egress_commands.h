// `space egress ...` and `space cred ...`: egress profiles and credentials from the command
// line. A secret is read from standard input (or an environment variable), never from the
// command line, where other users of the host could read it in the process list.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/client.h"

namespace space::cli {

class EgressCommands {
 public:
  void Register(CLI::App& app);
  // The exit code when one of these commands was given; nullopt otherwise.
  std::optional<int> Run(Client& c, bool json);

 private:
  CLI::App* egress_put_ = nullptr;
  CLI::App* egress_ls_ = nullptr;
  CLI::App* egress_get_ = nullptr;
  CLI::App* egress_rm_ = nullptr;
  CLI::App* cred_put_ = nullptr;
  CLI::App* cred_ls_ = nullptr;
  CLI::App* cred_rm_ = nullptr;
  std::string name_;
  std::vector<std::string> allow_, cidr_, hosts_;
  std::string header_, format_, env_, scope_, expires_at_, secret_env_;
  int rate_limit_ = -1;
};

// "host[:port,port...]" or "cidr[:port,...]" as one egress rule ({"host"|"cidr", "ports"}).
nlohmann::json ParseRuleFlag(const std::string& flag, const char* kind);

}  // namespace space::cli
