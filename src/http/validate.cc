#include "http/validate.h"

namespace space::api {

Result<nlohmann::json> ParseObject(const std::string& body) {
  if (body.empty()) return nlohmann::json::object();
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded()) return InvalidArgument("request body is not valid JSON");
  if (!j.is_object()) return InvalidArgument("request body must be a JSON object");
  return j;
}

Status CheckKnownFields(const nlohmann::json& obj, const std::set<std::string>& allowed) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    if (!allowed.count(it.key())) {
      return InvalidArgument("unknown field '" + it.key().substr(0, 64) + "'");
    }
  }
  return Status::Ok();
}

Result<std::string> GetString(const nlohmann::json& obj, const std::string& key, const std::string& def,
                              size_t max_len) {
  if (!obj.contains(key) || obj[key].is_null()) return def;
  if (!obj[key].is_string()) return InvalidArgument("field '" + key + "' must be a string");
  std::string s = obj[key].get<std::string>();
  if (s.size() > max_len) return InvalidArgument("field '" + key + "' is longer than " + std::to_string(max_len) + " bytes");
  if (s.find('\0') != std::string::npos) return InvalidArgument("field '" + key + "' contains a NUL byte");
  return s;
}

Result<int64_t> GetInt(const nlohmann::json& obj, const std::string& key, int64_t def, int64_t min, int64_t max) {
  if (!obj.contains(key) || obj[key].is_null()) return def;
  const auto& v = obj[key];
  int64_t n;
  if (v.is_number_integer()) {
    n = v.get<int64_t>();
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) n = INT64_MAX;
  } else if (v.is_number_float() && v.get<double>() == static_cast<double>(static_cast<int64_t>(v.get<double>()))) {
    n = static_cast<int64_t>(v.get<double>());
  } else {
    return InvalidArgument("field '" + key + "' must be an integer");
  }
  if (n < min || n > max) {
    return InvalidArgument("field '" + key + "' must be between " + std::to_string(min) + " and " + std::to_string(max));
  }
  return n;
}

Result<double> GetNumber(const nlohmann::json& obj, const std::string& key, double def, double min, double max) {
  if (!obj.contains(key) || obj[key].is_null()) return def;
  if (!obj[key].is_number()) return InvalidArgument("field '" + key + "' must be a number");
  double d = obj[key].get<double>();
  if (!(d >= min && d <= max)) {
    return InvalidArgument("field '" + key + "' must be between " + std::to_string(min) + " and " + std::to_string(max));
  }
  return d;
}

Result<bool> GetBool(const nlohmann::json& obj, const std::string& key, bool def) {
  if (!obj.contains(key) || obj[key].is_null()) return def;
  if (!obj[key].is_boolean()) return InvalidArgument("field '" + key + "' must be true or false");
  return obj[key].get<bool>();
}

Result<std::map<std::string, std::string>> GetStringMap(const nlohmann::json& obj, const std::string& key,
                                                        size_t max_entries, size_t max_key, size_t max_value,
                                                        bool (*key_ok)(const std::string&)) {
  std::map<std::string, std::string> out;
  if (!obj.contains(key) || obj[key].is_null()) return out;
  const auto& m = obj[key];
  if (!m.is_object()) return InvalidArgument("field '" + key + "' must be an object of strings");
  if (m.size() > max_entries) return InvalidArgument("field '" + key + "' has more than " + std::to_string(max_entries) + " entries");
  for (auto it = m.begin(); it != m.end(); ++it) {
    if (it.key().size() > max_key || !key_ok(it.key())) {
      return InvalidArgument("field '" + key + "' has an invalid key '" + it.key().substr(0, 64) + "'");
    }
    if (!it.value().is_string()) return InvalidArgument("field '" + key + "." + it.key() + "' must be a string");
    std::string v = it.value().get<std::string>();
    if (v.size() > max_value || v.find('\0') != std::string::npos) {
      return InvalidArgument("field '" + key + "." + it.key() + "' is too long or contains a NUL byte");
    }
    out[it.key()] = std::move(v);
  }
  return out;
}

Result<std::vector<std::string>> GetStringList(const nlohmann::json& obj, const std::string& key,
                                               size_t max_entries, size_t max_len) {
  std::vector<std::string> out;
  if (!obj.contains(key) || obj[key].is_null()) return out;
  const auto& a = obj[key];
  if (!a.is_array()) return InvalidArgument("field '" + key + "' must be an array of strings");
  if (a.size() > max_entries) return InvalidArgument("field '" + key + "' has more than " + std::to_string(max_entries) + " entries");
  for (const auto& v : a) {
    if (!v.is_string()) return InvalidArgument("field '" + key + "' must contain only strings");
    std::string s = v.get<std::string>();
    if (s.size() > max_len || s.find('\0') != std::string::npos) {
      return InvalidArgument("an entry of '" + key + "' is too long or contains a NUL byte");
    }
    out.push_back(std::move(s));
  }
  return out;
}

namespace {
bool AllOf(const std::string& s, bool (*ok)(char)) {
  for (char c : s) {
    if (!ok(c)) return false;
  }
  return true;
}
bool Alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }
}  // namespace

bool IsEnvName(const std::string& s) {
  if (s.empty() || (s[0] >= '0' && s[0] <= '9')) return false;
  return AllOf(s, [](char c) { return Alnum(c) || c == '_'; });
}

bool IsMetadataKey(const std::string& s) {
  return !s.empty() && AllOf(s, [](char c) { return Alnum(c) || c == '.' || c == '_' || c == '-'; });
}

bool IsTemplateName(const std::string& s) {
  if (s.empty() || s.size() > 63) return false;
  auto lower_alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!lower_alnum(s[0])) return false;
  for (char c : s) {
    if (!lower_alnum(c) && c != '.' && c != '_' && c != '-') return false;
  }
  return true;
}

bool IsUserName(const std::string& s) {
  if (s.empty() || s.size() > 32) return false;
  if (AllOf(s, [](char c) { return c >= '0' && c <= '9'; })) return s.size() <= 10;
  if (!((s[0] >= 'a' && s[0] <= 'z') || s[0] == '_')) return false;
  return AllOf(s, [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'; });
}

Status CheckSandboxPath(const std::string& path) {
  if (path.empty()) return InvalidArgument("path is required");
  if (path[0] != '/') return InvalidArgument("path must be absolute: " + path.substr(0, 256));
  if (path.size() > 4096) return InvalidArgument("path is longer than 4096 bytes");
  if (path.find('\0') != std::string::npos) return InvalidArgument("path contains a NUL byte");
  return Status::Ok();
}


}  // namespace space::api
