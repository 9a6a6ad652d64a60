#include "storage/template_index.h"

#include <nlohmann/json.hpp>

#include "common/syscall.h"
#include "storage/fs_util.h"
#include "storage/names.h"

namespace space::storage {

Result<TemplateIndex> LoadTemplateIndex(const std::string& path) {
  TemplateIndex index;
  if (!PathExists(path)) return index;
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(path, 16 << 20));
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) return Internal(path + ": not valid JSON");
  auto it = doc.find("templates");
  if (it == doc.end() || !it->is_object()) return Internal(path + ": missing \"templates\" object");
  for (const auto& [name, e] : it->items()) {
    if (!e.is_object() || !e.contains("digest") || !e["digest"].is_string()) {
      return Internal(path + ": bad entry for '" + name + "'");
    }
    TemplateInfo info;
    info.name = name;
    info.digest = e["digest"].get<std::string>();
    if (!ValidateTemplateName(name).ok() || !DigestHex(info.digest).ok()) {
      return Internal(path + ": bad name or digest for '" + name + "'");
    }
    if (e.contains("size_bytes") && e["size_bytes"].is_number_unsigned()) info.size_bytes = e["size_bytes"].get<uint64_t>();
    if (e.contains("created_at_ms") && e["created_at_ms"].is_number_integer()) {
      info.created_at_ms = e["created_at_ms"].get<int64_t>();
    }
    index[name] = std::move(info);
  }
  return index;
}

Status SaveTemplateIndex(const std::string& path, const TemplateIndex& index) {
  nlohmann::json templates = nlohmann::json::object();
  for (const auto& [name, info] : index) {
    templates[name] = {{"digest", info.digest}, {"size_bytes", info.size_bytes}, {"created_at_ms", info.created_at_ms}};
  }
  nlohmann::json doc = {{"templates", templates}};
  return WriteFileAtomic(path, doc.dump(2) + "\n", 0600);
}

}  // namespace space::storage
