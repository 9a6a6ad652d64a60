#include "http/scopes.h"

#include <algorithm>

#include "http/http.h"

namespace space::api {
namespace {

constexpr const char* kAreas[] = {"sandboxes", "templates", "egress"};

}  // namespace

std::vector<std::string> AllScopes() {
  std::vector<std::string> out;
  for (const char* a : kAreas) {
    out.push_back(std::string(a) + ":read");
    out.push_back(std::string(a) + ":write");
  }
  out.push_back(kAdminScope);
  return out;
}

bool IsScope(const std::string& s) {
  auto all = AllScopes();
  return std::find(all.begin(), all.end(), s) != all.end();
}

std::vector<std::string> DefaultScopes() {
  std::vector<std::string> out;
  for (const char* a : kAreas) out.push_back(std::string(a) + ":write");
  return out;
}

bool HasScope(const std::vector<std::string>& have, const std::string& need) {
  if (need.empty()) return true;
  for (const auto& h : have) {
    if (h == kAdminScope || h == need) return true;
    // "x:write" grants "x:read".
    const size_t colon = need.find(':');
    if (colon != std::string::npos && need.compare(colon, std::string::npos, ":read") == 0 &&
        h == need.substr(0, colon) + ":write") {
      return true;
    }
  }
  return false;
}

std::string ScopeFor(const std::string& method, const std::vector<std::string>& path) {
  const bool read = method == "GET" || method == "HEAD";
  const std::string access = read ? ":read" : ":write";
  if (path.empty()) return kAdminScope;
  if (path[0] == "metrics") return "sandboxes:read";
  if (path.size() < 2) return kAdminScope;
  const std::string& area = path[1];
  if (area == "keys" && path.size() == 3 && path[2] == "self" && read) return "";
  if (area == "teams" || area == "keys" || area == "nodes" || area == "jobs") return kAdminScope;
  if (area == "sandboxes" && path.size() == 4 && path[3] == "terminal") return "sandboxes:write";
  if (area == "operations" && read) return "";  // a team's own operations, whichever area started them
  if (area == "sandboxes" || area == "snapshots" || area == "audit" || area == "volumes") return "sandboxes" + access;
  if (area == "templates") return "templates" + access;
  if (area == "egress-profiles" || area == "credentials") return "egress" + access;
  return kAdminScope;  // a route added without a scope is admin's until it gets one
}

Status MissingScope(const std::string& need, const Request& req) {
  std::string have;
  for (const auto& s : req.scopes) have += (have.empty() ? "" : ", ") + s;
  return PermissionDenied("this key lacks scope '" + need + "' (it has: " + (have.empty() ? "none" : have) + ")");
}

}  // namespace space::api
