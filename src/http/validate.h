// Request validation: typed, bounded reads of JSON request bodies. Every field is checked
// for type and range, unknown fields are refused (so a misspelt option never silently does
// nothing), and the first problem becomes a clear invalid_argument Status.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace space::api {

// Parses a request body as a JSON object ("" -> {}).
Result<nlohmann::json> ParseObject(const std::string& body);

// Refuses fields not in `allowed`.
Status CheckKnownFields(const nlohmann::json& obj, const std::set<std::string>& allowed);

Result<std::string> GetString(const nlohmann::json& obj, const std::string& key, const std::string& def,
                              size_t max_len);
Result<int64_t> GetInt(const nlohmann::json& obj, const std::string& key, int64_t def, int64_t min, int64_t max);
Result<double> GetNumber(const nlohmann::json& obj, const std::string& key, double def, double min, double max);
Result<bool> GetBool(const nlohmann::json& obj, const std::string& key, bool def);
// An object of string values, with bounded counts and sizes; keys checked by `key_ok`.
Result<std::map<std::string, std::string>> GetStringMap(const nlohmann::json& obj, const std::string& key,
                                                        size_t max_entries, size_t max_key, size_t max_value,
                                                        bool (*key_ok)(const std::string&));
Result<std::vector<std::string>> GetStringList(const nlohmann::json& obj, const std::string& key,
                                               size_t max_entries, size_t max_len);

bool IsEnvName(const std::string& s);       // [A-Za-z_][A-Za-z0-9_]*
bool IsMetadataKey(const std::string& s);   // [A-Za-z0-9._-]+
bool IsTemplateName(const std::string& s);  // [a-z0-9][a-z0-9._-]{0,62}
bool IsUserName(const std::string& s);      // [a-z_][a-z0-9_-]{0,31} or decimal uid
// Absolute, <= 4096 bytes, no NUL; `..` components allowed (resolved inside the sandbox).
Status CheckSandboxPath(const std::string& path);

}  // namespace space::api
