// The proto3 canonical-JSON shapes of envd's messages that SPACE builds from its own data
// (docs/e2b.md, reference §3.2): EntryInfo from a guest stat entry, paths relative to the
// caller's home, and bounded readers for request fields. Stateless and thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "node/file_entry.h"

namespace space::e2b {

// A non-negative JSON integer (parsed or built in code, signed or unsigned), else nullopt.
std::optional<uint64_t> AsUint(const nlohmann::json& v);

// "-rw-r--r--" style text for a mode (type from `type_word`: file|dir|symlink|other).
std::string PermissionString(const std::string& type_word, uint32_t mode);

// envd's EntryInfo for a file entry (checked by the node). int64 size is a decimal string, as
// proto3 JSON wants.
nlohmann::json EntryInfoJson(const node::FileEntry& entry);

// An absolute sandbox path for `path` as the SDK sent it: relative paths (and "~/...")
// resolve against `home`. Fails on empty, oversized or NUL-carrying input.
Result<std::string> ResolvePath(const std::string& path, const std::string& home);

// Reads a string field (absent or null -> ""), bounded.
Result<std::string> StringField(const nlohmann::json& msg, const char* name, size_t max_len);
// Reads a ProcessSelector {"pid": n} | {"tag": "..."}.
struct Selector {
  uint32_t pid = 0;
  std::string tag;
};
Result<Selector> SelectorField(const nlohmann::json& msg, const char* name);
// A map<string,string> field, bounded in entries and sizes.
Result<std::map<std::string, std::string>> StringMapField(const nlohmann::json& msg, const char* name,
                                                          size_t max_entries, size_t max_len);
// A proto3 JSON bytes field (standard or URL-safe base64, padding optional), bounded.
Result<std::string> BytesField(const nlohmann::json& msg, const char* name, size_t max_decoded);

}  // namespace space::e2b
