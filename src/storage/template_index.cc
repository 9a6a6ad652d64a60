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
    if (e.contains("team") && e["team"].is_string()) info.team = e["team"].get<std::string>();
    if (e.contains("earlier_digests") && e["earlier_digests"].is_array()) {
      for (const auto& d : e["earlier_digests"]) {
        if (!d.is_string() || !DigestHex(d.get<std::string>()).ok())
          return Internal(path + ": bad earlier digest for '" + name + "'");
        if (info.earlier_digests.size() < kMaxEarlierDigests) info.earlier_digests.push_back(d.get<std::string>());
      }
    }
    index[name] = std::move(info);
  }
  return index;
}

Result<LayerCache> LoadLayerCache(const std::string& path) {
  LayerCache cache;
  if (!PathExists(path)) return cache;
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(path, 16 << 20));
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("layers") || !doc["layers"].is_object()) {
    return Internal(path + ": not a layer cache");
  }
  for (const auto& [key, d] : doc["layers"].items()) {
    if (!d.is_string() || !DigestHex(d.get<std::string>()).ok()) return Internal(path + ": bad layer for " + key);
    cache[key] = d.get<std::string>();
  }
  return cache;
}

Status SaveLayerCache(const std::string& path, const LayerCache& cache) {
  nlohmann::json layers = nlohmann::json::object();
  for (const auto& [key, digest] : cache) layers[key] = digest;
  return WriteFileAtomic(path, nlohmann::json{{"layers", layers}}.dump(1) + "\n", 0600);
}

Status SaveTemplateIndex(const std::string& path, const TemplateIndex& index) {
  nlohmann::json templates = nlohmann::json::object();
  for (const auto& [name, info] : index) {
    nlohmann::json e = {
        {"digest", info.digest}, {"size_bytes", info.size_bytes}, {"created_at_ms", info.created_at_ms}};
    if (!info.team.empty()) e["team"] = info.team;
    if (!info.earlier_digests.empty()) e["earlier_digests"] = info.earlier_digests;
    templates[name] = std::move(e);
  }
  nlohmann::json doc = {{"templates", templates}};
  return WriteFileAtomic(path, doc.dump(2) + "\n", 0600);
}

}  // namespace space::storage
