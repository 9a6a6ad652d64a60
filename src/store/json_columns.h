// The store's JSON text columns, read and written in one place. A column that does not parse
// (a row written by hand, or by a newer version) reads as its empty value, never as an error:
// the row's other columns stay usable.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace space::store {

// ["a", "b"]: the strings of a JSON array; other elements are left out.
std::vector<std::string> ParseStringList(const std::string& text);
std::string EncodeStringList(const std::vector<std::string>& list);
// {...}: a JSON object, or {}.
nlohmann::json ParseObject(const std::string& text);
// [...]: a JSON array, or [].
nlohmann::json ParseArray(const std::string& text);
// {"k": "v", ...}: the string members of a JSON object; other members are left out.
std::map<std::string, std::string> ParseStringMap(const std::string& text);

}  // namespace space::store
