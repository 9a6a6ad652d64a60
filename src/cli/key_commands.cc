#include "cli/key_commands.h"

#include <iostream>

namespace space::cli {
namespace {

std::string Text(const nlohmann::json& j, const char* field) {
  return j.contains(field) && j[field].is_string() ? j[field].get<std::string>() : "-";
}

}  // namespace

void KeyCommands::Register(CLI::App& app) {
  auto* team = app.add_subcommand("team", "teams (an admin key)");
  team->require_subcommand(1);
  team_create_ = team->add_subcommand("create", "make a team");
  team_create_->add_option("name", name_)->required();
  team_ls_ = team->add_subcommand("ls", "list the teams");

  auto* key = app.add_subcommand("key", "API keys (an admin key, but for `key self`)");
  key->require_subcommand(1);
  key_create_ = key->add_subcommand("create", "make a key for a team and print it (shown this once)");
  key_create_->add_option("--team", team_, "the team the key acts for")->required();
  key_create_->add_option("--name", name_, "what the key is for")->required();
  key_create_->add_option("--scope", scopes_,
                          "sandboxes:read|write, templates:read|write, egress:read|write, admin (repeatable; "
                          "default: every area's write)");
  key_create_->add_option("--expires-at", expires_at_, "RFC 3339 UTC time, e.g. 2027-01-01T00:00:00Z");
  key_ls_ = key->add_subcommand("ls", "list keys (never their secrets)");
  key_ls_->add_option("--team", team_, "only this team's");
  key_rm_ = key->add_subcommand("rm", "revoke a key: its next call is refused");
  key_rm_->add_option("id", id_)->required();
  key_self_ = key->add_subcommand("self", "the key in use: its team and scopes");
}

std::optional<int> KeyCommands::Run(Client& c, bool json) {
  auto call = [&](const std::string& method, const std::string& path, const std::string& body) {
    return CallJson(c, method, path, body);
  };
  auto print_key = [&](const nlohmann::json& k) {
    std::string scopes;
    for (const auto& s : k.value("scopes", nlohmann::json::array()))
      scopes += (scopes.empty() ? "" : ",") + s.get<std::string>();
    std::cout << Text(k, "id") << "\t" << Text(k, "team") << "\t" << Text(k, "name") << "\t" << scopes << "\texpires "
              << Text(k, "expires_at") << (k.contains("revoked_at") && k["revoked_at"].is_string() ? "\trevoked" : "")
              << "\n";
  };
  if (team_create_->parsed()) {
    auto j = call("POST", "/v1/teams", nlohmann::json{{"name", name_}}.dump());
    if (!j) return 1;
    std::cout << (json ? j->dump(2) : Text(*j, "name")) << "\n";
    return 0;
  }
  if (team_ls_->parsed()) {
    auto j = call("GET", "/v1/teams", "");
    if (!j) return 1;
    if (json) {
      std::cout << j->dump(2) << "\n";
      return 0;
    }
    for (const auto& t : (*j)["teams"]) std::cout << Text(t, "name") << "\t" << Text(t, "created_at") << "\n";
    return 0;
  }
  if (key_create_->parsed()) {
    nlohmann::json body = {{"team", team_}, {"name", name_}};
    if (!scopes_.empty()) body["scopes"] = scopes_;
    if (!expires_at_.empty()) body["expires_at"] = expires_at_;
    auto j = call("POST", "/v1/keys", body.dump());
    if (!j) return 1;
    if (json) {
      std::cout << j->dump(2) << "\n";
    } else {
      std::cerr << "key " << Text(*j, "id") << " for team " << Text(*j, "team") << " (shown this once):\n";
      std::cout << Text(*j, "key") << "\n";
    }
    return 0;
  }
  if (key_ls_->parsed()) {
    auto j = call("GET", "/v1/keys" + (team_.empty() ? std::string() : "?team=" + team_), "");
    if (!j) return 1;
    if (json) {
      std::cout << j->dump(2) << "\n";
      return 0;
    }
    for (const auto& k : (*j)["keys"]) print_key(k);
    return 0;
  }
  if (key_rm_->parsed()) return call("DELETE", "/v1/keys/" + id_, "") ? 0 : 1;
  if (key_self_->parsed()) {
    auto j = call("GET", "/v1/keys/self", "");
    if (!j) return 1;
    if (json) {
      std::cout << j->dump(2) << "\n";
    } else {
      print_key(*j);
    }
    return 0;
  }
  return std::nullopt;
}

}  // namespace space::cli
