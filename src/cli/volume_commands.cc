#include "cli/volume_commands.h"

#include <iostream>

namespace space::cli {
namespace {

// One line per volume: name, size, where its newest copy is, its mounts.
void PrintVolume(const nlohmann::json& v) {
  std::cout << v.value("name", "") << "\t" << v.value("size_mb", int64_t{0}) << " MiB\t";
  if (v["node"].is_string()) {
    std::cout << "on " << v["node"].get<std::string>();
  } else {
    std::cout << (v.value("synced", false) ? "in the store" : "empty");
  }
  if (v.contains("mounts")) {
    for (const auto& m : v["mounts"]) {
      std::cout << "\t" << m.value("sandbox", "") << ":" << m.value("path", "")
                << (m.value("read_only", false) ? ":ro" : "");
    }
  }
  std::cout << "\n";
}

}  // namespace

void VolumeCommands::Register(CLI::App& app) {
  auto* volume = app.add_subcommand("volume", "volumes: named data that outlives sandboxes");
  volume->require_subcommand(1);
  create_ = volume->add_subcommand("create", "create a volume (mount it with `space create --volume NAME:/path`)");
  create_->add_option("name", name_)->required();
  create_->add_option("--size-mb", size_mb_, "its size limit in MiB (default 1024)")->check(CLI::Range(1, 1 << 20));
  ls_ = volume->add_subcommand("ls", "list the team's volumes");
  rm_ = volume->add_subcommand("rm", "delete a volume and its data (refused while a sandbox mounts it)");
  rm_->add_option("name", name_)->required();
  fork_ = volume->add_subcommand("fork", "a new volume holding what NAME holds now");
  fork_->add_option("name", name_)->required();
  fork_->add_option("new_name", new_name_)->required();
}

std::optional<int> VolumeCommands::Run(Client& c, bool json) {
  auto call = [&](const std::string& method, const std::string& path, const std::string& body) {
    return CallJson(c, method, path, body);
  };
  auto show = [&](const nlohmann::json& j) {
    if (json) {
      std::cout << j.dump(2) << "\n";
    } else {
      PrintVolume(j);
    }
    return 0;
  };
  if (create_->parsed()) {
    auto j = call("PUT", "/v1/volumes/" + name_, nlohmann::json{{"size_mb", size_mb_}}.dump());
    return j ? show(*j) : 1;
  }
  if (ls_->parsed()) {
    auto j = call("GET", "/v1/volumes", "");
    if (!j) return 1;
    if (json) {
      std::cout << j->dump(2) << "\n";
      return 0;
    }
    for (const auto& v : (*j)["volumes"]) PrintVolume(v);
    return 0;
  }
  if (rm_->parsed()) return call("DELETE", "/v1/volumes/" + name_, "") ? 0 : 1;
  if (fork_->parsed()) {
    auto j = call("POST", "/v1/volumes/" + name_ + "/fork", nlohmann::json{{"name", new_name_}}.dump());
    return j ? show(*j) : 1;
  }
  return std::nullopt;
}

}  // namespace space::cli
