#include "store/json_columns.h"

namespace space::store {

std::vector<std::string> ParseStringList(const std::string& text) {
  std::vector<std::string> out;
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_array()) return out;
  for (const auto& e : j) {
    if (e.is_string()) out.push_back(e.get<std::string>());
  }
  return out;
}

std::string EncodeStringList(const std::vector<std::string>& list) { return nlohmann::json(list).dump(); }

nlohmann::json ParseObject(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  return j.is_object() ? j : nlohmann::json::object();
}

nlohmann::json ParseArray(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  return j.is_array() ? j : nlohmann::json::array();
}

std::map<std::string, std::string> ParseStringMap(const std::string& text) {
  std::map<std::string, std::string> out;
  const nlohmann::json object = ParseObject(text);  // items() refers to it: not a temporary
  for (const auto& [k, v] : object.items()) {
    if (v.is_string()) out[k] = v.get<std::string>();
  }
  return out;
}

}  // namespace space::store
