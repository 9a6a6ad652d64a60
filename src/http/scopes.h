// What an API key may do. A scope is "<area>:read" or "<area>:write" for the areas
// sandboxes (sandboxes, their processes, files, ports, snapshots, operations and audit),
// templates, and egress (egress profiles and credentials); "x:write" grants "x:read". "admin"
// grants everything, teams and keys included; only the admin team ("default") holds it.
// Pure; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "common/result.h"

namespace space::api {

inline constexpr char kAdminScope[] = "admin";
inline constexpr char kAdminTeam[] = "default";

bool IsScope(const std::string& s);
// Every scope, for error messages and docs.
std::vector<std::string> AllScopes();
// What a key that names no scopes gets: every area's write, not admin.
std::vector<std::string> DefaultScopes();
bool HasScope(const std::vector<std::string>& have, const std::string& need);

// The scope a v1 request needs, from its method and path segments ({"v1", "sandboxes", ...}):
// reads need ":read", anything else ":write" (a terminal, though a GET, is ":write": it runs a
// shell). "" for what any valid key may do (GET /v1/keys/self, reading the team's operations);
// "admin" for teams, keys, and a fleet's nodes and jobs.
std::string ScopeFor(const std::string& method, const std::vector<std::string>& path);

// The 403 for a key without `need`, naming what it has.
struct Request;
Status MissingScope(const std::string& need, const Request& req);

}  // namespace space::api
