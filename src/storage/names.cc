#include "storage/names.h"

namespace space::storage {
namespace {
bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool IsAlnum(char c) { return IsLowerAlnum(c) || (c >= 'A' && c <= 'Z'); }
}  // namespace

Status ValidateTemplateName(const std::string& name) {
  bool ok = !name.empty() && name.size() <= 63 && IsLowerAlnum(name[0]);
  for (char c : name) ok = ok && (IsLowerAlnum(c) || c == '.' || c == '_' || c == '-');
  if (!ok) return InvalidArgument("template name '" + name + "' must match [a-z0-9][a-z0-9._-]{0,62}");
  return Status::Ok();
}

Status ValidateSnapshotId(const std::string& id) {
  static constexpr std::string_view kPrefix = "snap_";
  bool ok = id.size() == kPrefix.size() + 22 && id.compare(0, kPrefix.size(), kPrefix) == 0;
  for (size_t i = kPrefix.size(); ok && i < id.size(); ++i) ok = IsAlnum(id[i]);
  if (!ok) return InvalidArgument("snapshot id '" + id + "' must match snap_[A-Za-z0-9]{22}");
  return Status::Ok();
}

Status ValidateVolumeDirName(const std::string& name) {
  static constexpr std::string_view kPrefix = "vol_";
  const size_t dot = name.find('.');
  const std::string_view id = std::string_view(name).substr(0, dot);
  bool ok = id.size() > kPrefix.size() && id.size() <= kPrefix.size() + 64 && id.substr(0, kPrefix.size()) == kPrefix;
  for (size_t i = kPrefix.size(); ok && i < id.size(); ++i) ok = IsAlnum(id[i]);
  if (ok && dot != std::string::npos) {
    const std::string_view suffix = std::string_view(name).substr(dot + 1);
    ok = !suffix.empty() && suffix.size() <= 80;
    for (char c : suffix) ok = ok && (IsAlnum(c) || c == '_' || c == '-');
  }
  if (!ok)
    return InvalidArgument("volume name '" + name.substr(0, 160) +
                           "' must match vol_[A-Za-z0-9]{1,64}(.[A-Za-z0-9_-]{1,80})?");
  return Status::Ok();
}

Result<std::string> DigestHex(const std::string& digest) {
  static constexpr std::string_view kPrefix = "sha256:";
  bool ok = digest.size() == kPrefix.size() + 64 && digest.compare(0, kPrefix.size(), kPrefix) == 0;
  for (size_t i = kPrefix.size(); ok && i < digest.size(); ++i) {
    char c = digest[i];
    ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  }
  if (!ok) return InvalidArgument("digest '" + digest + "' must be sha256:<64 lowercase hex>");
  return digest.substr(kPrefix.size());
}

}  // namespace space::storage
