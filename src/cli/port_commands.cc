#include "cli/port_commands.h"

#include <iostream>

namespace space::cli {
namespace {

int Fail(const std::string& message) {
  std::cerr << "space: " << message << "\n";
  return 1;
}

}  // namespace

void PortCommands::Register(CLI::App& app) {
  auto* port = app.add_subcommand("port", "preview ports: URLs that reach a server inside a sandbox");
  port->require_subcommand(1);
  open_ = port->add_subcommand("open", "open a port and print its URL (a private port's URL carries its token)");
  open_->add_option("id", id_)->required();
  open_->add_option("port", port_)->required()->check(CLI::Range(1, 65535));
  open_->add_flag("--public", public_, "anyone with the URL may connect (default: the token is needed)");
  open_->add_flag("--auto-resume", auto_resume_, "a request to a paused or suspended sandbox resumes it");
  ls_ = port->add_subcommand("ls", "list a sandbox's open ports");
  ls_->add_option("id", id_)->required();
  close_ = port->add_subcommand("close", "close a port; its open connections end at once");
  close_->add_option("id", id_)->required();
  close_->add_option("port", port_)->required();
}

std::optional<int> PortCommands::Run(Client& c, bool json) {
  const std::string base = "/v1/sandboxes/" + id_ + "/ports";
  if (open_->parsed()) {
    nlohmann::json body = {{"port", port_}, {"public", public_}, {"auto_resume", auto_resume_}};
    auto r = c.Call("POST", base, body.dump());
    if (!r.ok()) return Fail(r.status().message());
    if (r->status >= 300) return Fail(ResponseError(*r).message());
    auto j = nlohmann::json::parse(r->body, nullptr, false);
    if (j.is_discarded()) return Fail("unreadable answer from the server");
    if (json) {
      std::cout << j.dump(2) << "\n";
    } else if (j["token"].is_string()) {
      // Opening this once in a browser sets the port's cookie and drops the token from the URL.
      std::cout << j["url"].get<std::string>() << "?token=" << j["token"].get<std::string>() << "\n";
    } else {
      std::cout << j["url"].get<std::string>() << "\n";
    }
    return 0;
  }
  if (ls_->parsed()) {
    auto r = c.Call("GET", base, "");
    if (!r.ok()) return Fail(r.status().message());
    if (r->status >= 300) return Fail(ResponseError(*r).message());
    auto j = nlohmann::json::parse(r->body, nullptr, false);
    if (j.is_discarded()) return Fail("unreadable answer from the server");
    if (json) {
      std::cout << j.dump(2) << "\n";
      return 0;
    }
    for (const auto& p : j["ports"]) {
      std::cout << p["port"].get<int64_t>() << "\t" << (p["public"].get<bool>() ? "public" : "private") << "\t"
                << p["connections"].get<int64_t>() << " open\t" << p["url"].get<std::string>() << "\n";
    }
    return 0;
  }
  if (close_->parsed()) {
    auto r = c.Call("DELETE", base + "/" + std::to_string(port_), "");
    if (!r.ok()) return Fail(r.status().message());
    if (r->status >= 300) return Fail(ResponseError(*r).message());
    return 0;
  }
  return std::nullopt;
}

}  // namespace space::cli
