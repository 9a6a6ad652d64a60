#include "snapshot/blob_store.h"

namespace space::snapshot {
namespace {

constexpr std::string_view kManifestSuffix = ".json";

bool IsLowerHex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

bool IsIdChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

}  // namespace

bool IsSha256Hex(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!IsLowerHex(c)) return false;
  }
  return true;
}

Status ValidateSnapId(std::string_view id) {
  if (id.empty() || id.size() > 128) return InvalidArgument("snapshot id must be 1-128 characters");
  if (id[0] == '.' || id[0] == '-') return InvalidArgument("snapshot id must not start with '.' or '-'");
  for (char c : id) {
    if (!IsIdChar(c)) return InvalidArgument("snapshot id may hold only [A-Za-z0-9._-]");
  }
  return Status::Ok();
}

std::string ObjectKey(std::string_view sha256_hex) {
  std::string key(kObjectsPrefix);
  key.append(sha256_hex.substr(0, 2));
  key += '/';
  key.append(sha256_hex);
  return key;
}

std::string ManifestKey(std::string_view snap_id) {
  std::string key(kManifestsPrefix);
  key.append(snap_id);
  key.append(kManifestSuffix);
  return key;
}

Result<std::string> HashFromObjectKey(std::string_view key) {
  // objects/ + aa + / + 64 hex
  if (key.size() != kObjectsPrefix.size() + 3 + 64 || key.substr(0, kObjectsPrefix.size()) != kObjectsPrefix) {
    return InvalidArgument("not an object key");
  }
  std::string_view rest = key.substr(kObjectsPrefix.size());
  std::string_view hex = rest.substr(3);
  if (rest[2] != '/' || !IsSha256Hex(hex) || rest.substr(0, 2) != hex.substr(0, 2)) {
    return InvalidArgument("not an object key");
  }
  return std::string(hex);
}

namespace {
// The id in "<prefix><id>.json", when it is a valid id.
Result<std::string> IdFromJsonKey(std::string_view key, std::string_view prefix, const char* what) {
  if (key.size() <= prefix.size() + kManifestSuffix.size() || key.substr(0, prefix.size()) != prefix ||
      key.substr(key.size() - kManifestSuffix.size()) != kManifestSuffix) {
    return InvalidArgument(std::string("not a ") + what + " key");
  }
  std::string_view id = key.substr(prefix.size(), key.size() - prefix.size() - kManifestSuffix.size());
  if (!ValidateSnapId(id).ok()) return InvalidArgument(std::string("not a ") + what + " key");
  return std::string(id);
}
}  // namespace

Result<std::string> SnapIdFromManifestKey(std::string_view key) {
  return IdFromJsonKey(key, kManifestsPrefix, "manifest");
}

Result<std::string> NameFromTemplateKey(std::string_view key) {
  return IdFromJsonKey(key, kTemplatesPrefix, "template");
}

std::string TemplateKey(std::string_view name) {
  std::string key(kTemplatesPrefix);
  key.append(name);
  key.append(kManifestSuffix);
  return key;
}

Status ValidateKey(std::string_view key) {
  if (HashFromObjectKey(key).ok() || SnapIdFromManifestKey(key).ok() || NameFromTemplateKey(key).ok()) {
    return Status::Ok();
  }
  return InvalidArgument("invalid blob key \"" + std::string(key.substr(0, 200)) + "\"");
}

}  // namespace space::snapshot
