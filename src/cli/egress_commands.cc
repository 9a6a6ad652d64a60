#include "cli/egress_commands.h"

#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <sstream>

namespace space::cli {
namespace {

int Fail(const std::string& message) {
  std::cerr << "space: " << message << "\n";
  return 1;
}

int Show(Client& c, const std::string& method, const std::string& target, const std::string& body, bool json,
         const std::function<void(const nlohmann::json&)>& human) {
  auto r = c.Call(method, target, body);
  if (!r.ok()) return Fail(r.status().message());
  if (r->status >= 300) return Fail(ResponseError(*r).message());
  auto j = nlohmann::json::parse(r->body, nullptr, false);
  if (json || !human || j.is_discarded()) {
    if (!r->body.empty()) std::cout << (j.is_discarded() ? r->body : j.dump(2)) << "\n";
  } else {
    human(j);
  }
  return 0;
}

std::string Rules(const nlohmann::json& allow) {
  std::string out;
  for (const auto& r : allow) {
    std::string one = r.contains("host") ? r["host"].get<std::string>() : r.value("cidr", "");
    if (r.contains("ports")) {
      std::string ports;
      for (const auto& p : r["ports"]) ports += (ports.empty() ? ":" : ",") + std::to_string(p.get<int>());
      one += ports;
    }
    out += (out.empty() ? "" : " ") + one;
  }
  return out;
}

}  // namespace

nlohmann::json ParseRuleFlag(const std::string& flag, const char* kind) {
  // The port list follows the last ':' for hosts; a CIDR has no ':' of its own in IPv4, and
  // IPv6 CIDRs must be bracketed ("[2001:db8::/32]:443").
  std::string target = flag, ports;
  size_t colon = flag.rfind(':');
  size_t bracket = flag.rfind(']');
  if (colon != std::string::npos && (bracket == std::string::npos || colon > bracket) &&
      (flag.find(':') == colon || bracket != std::string::npos)) {
    target = flag.substr(0, colon);
    ports = flag.substr(colon + 1);
  }
  if (!target.empty() && target.front() == '[' && target.back() == ']') target = target.substr(1, target.size() - 2);
  nlohmann::json rule = {{kind, target}};
  if (!ports.empty()) {
    nlohmann::json list = nlohmann::json::array();
    std::stringstream in(ports);
    std::string p;
    while (std::getline(in, p, ',')) {
      char* end = nullptr;
      long v = std::strtol(p.c_str(), &end, 10);
      // Out-of-range values go to the server as they are, which refuses them with the rule's index.
      list.push_back(end != nullptr && *end == '\0' && !p.empty() ? nlohmann::json(v) : nlohmann::json(p));
    }
    rule["ports"] = list;
  }
  return rule;
}

void EgressCommands::Register(CLI::App& app) {
  auto* egress = app.add_subcommand("egress", "manage egress profiles (where sandboxes may connect)");
  egress->require_subcommand(1);
  egress_put_ = egress->add_subcommand("put", "create or replace a profile");
  egress_put_->add_option("name", name_)->required();
  egress_put_->add_option("--allow", allow_, "HOST[:PORT,...] a host or *.suffix (default ports 80,443)");
  egress_put_->add_option("--cidr", cidr_, "CIDR[:PORT,...] an address range");
  egress_ls_ = egress->add_subcommand("ls", "list profiles");
  egress_get_ = egress->add_subcommand("get", "show a profile");
  egress_get_->add_option("name", name_)->required();
  egress_rm_ = egress->add_subcommand("rm", "delete a profile");
  egress_rm_->add_option("name", name_)->required();

  auto* cred = app.add_subcommand("cred", "manage credentials (secrets the gateway injects; read from stdin)");
  cred->require_subcommand(1);
  cred_put_ = cred->add_subcommand("put", "create or replace a credential; the secret is read from stdin");
  cred_put_->add_option("name", name_)->required();
  cred_put_->add_option("--host", hosts_, "host (or *.suffix) the secret is sent to")->required();
  cred_put_->add_option("--header", header_, "header that carries it (default Authorization)");
  cred_put_->add_option("--format", format_, "header value, with {secret} (default \"Bearer {secret}\")");
  cred_put_->add_option("--env", env_, "environment variable that holds the placeholder in sandboxes");
  cred_put_->add_option("--scope", scope_, "team | sandbox:<id> | metadata:<k>=<v> (default team)");
  cred_put_->add_option("--expires-at", expires_at_, "RFC 3339 UTC time, e.g. 2027-01-01T00:00:00Z");
  cred_put_->add_option("--rate-limit", rate_limit_, "uses per minute (0 = unlimited)");
  cred_put_->add_option("--secret-env", secret_env_, "read the secret from this environment variable instead");
  cred_ls_ = cred->add_subcommand("ls", "list credentials (never their secrets)");
  cred_rm_ = cred->add_subcommand("rm", "delete a credential");
  cred_rm_->add_option("name", name_)->required();
}

std::optional<int> EgressCommands::Run(Client& c, bool json) {
  if (egress_put_->parsed()) {
    nlohmann::json allow = nlohmann::json::array();
    for (const auto& a : allow_) allow.push_back(ParseRuleFlag(a, "host"));
    for (const auto& a : cidr_) allow.push_back(ParseRuleFlag(a, "cidr"));
    if (allow.empty()) return Fail("egress put: give at least one --allow or --cidr");
    return Show(c, "PUT", "/v1/egress-profiles/" + name_, nlohmann::json{{"allow", allow}}.dump(), json,
                [](const nlohmann::json& j) { std::cout << j.value("name", "") << ": " << Rules(j["allow"]) << "\n"; });
  }
  if (egress_ls_->parsed()) {
    return Show(c, "GET", "/v1/egress-profiles", "", json, [](const nlohmann::json& j) {
      for (const auto& p : j["egress_profiles"]) std::cout << p.value("name", "") << ": " << Rules(p["allow"]) << "\n";
    });
  }
  if (egress_get_->parsed()) return Show(c, "GET", "/v1/egress-profiles/" + name_, "", true, nullptr);
  if (egress_rm_->parsed()) return Show(c, "DELETE", "/v1/egress-profiles/" + name_, "", json, nullptr);
  if (cred_put_->parsed()) {
    std::string secret;
    if (!secret_env_.empty()) {
      const char* v = std::getenv(secret_env_.c_str());
      if (v == nullptr) return Fail("cred put: $" + secret_env_ + " is not set");
      secret = v;
    } else {
      if (::isatty(STDIN_FILENO)) std::cerr << "secret for " << name_ << " (end with Ctrl-D): ";
      std::stringstream in;
      in << std::cin.rdbuf();
      secret = in.str();
      while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) secret.pop_back();
    }
    if (secret.empty()) return Fail("cred put: empty secret");
    nlohmann::json body = {{"secret", secret}, {"hosts", hosts_}};
    std::fill(secret.begin(), secret.end(), '\0');
    if (!header_.empty()) body["header"] = header_;
    if (!format_.empty()) body["format"] = format_;
    if (!env_.empty()) body["env"] = env_;
    if (!scope_.empty()) body["scope"] = scope_;
    if (!expires_at_.empty()) body["expires_at"] = expires_at_;
    if (rate_limit_ >= 0) body["rate_limit_per_min"] = rate_limit_;
    return Show(c, "PUT", "/v1/credentials/" + name_, body.dump(), json,
                [](const nlohmann::json& j) { std::cout << j.value("name", "") << " stored\n"; });
  }
  if (cred_ls_->parsed()) {
    return Show(c, "GET", "/v1/credentials", "", json, [](const nlohmann::json& j) {
      for (const auto& cr : j["credentials"]) {
        std::string hosts;
        for (const auto& h : cr["hosts"]) hosts += (hosts.empty() ? "" : ",") + h.get<std::string>();
        std::cout << cr.value("name", "") << " hosts=" << hosts << " env=" << cr.value("env", "") << "\n";
      }
    });
  }
  if (cred_rm_->parsed()) return Show(c, "DELETE", "/v1/credentials/" + name_, "", json, nullptr);
  return std::nullopt;
}

}  // namespace space::cli
