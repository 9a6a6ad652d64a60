#include "e2b/proto_json.h"

#include "common/base64.h"

namespace space::e2b {
namespace {

using nlohmann::json;

const json* Member(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

std::string OwnerName(int64_t id) {
  if (id < 0) return "";
  // The templates' two accounts; others are shown by number (the node does not read the
  // sandbox's /etc/passwd for a stat).
  if (id == 0) return "root";
  if (id == 1000) return "user";
  return std::to_string(id);
}

}  // namespace

std::optional<uint64_t> AsUint(const json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return static_cast<uint64_t>(v.get<int64_t>());
  return std::nullopt;
}

std::string PermissionString(const std::string& type_word, uint32_t mode) {
  std::string s;
  s += type_word == "dir" ? 'd' : type_word == "symlink" ? 'l' : '-';
  const char* rwx = "rwxrwxrwx";
  for (int i = 0; i < 9; ++i) s += (mode & (0400u >> i)) ? rwx[i] : '-';
  return s;
}

json EntryInfoJson(const node::FileEntry& e) {
  const std::string type(node::FileTypeName(e.type));
  // Entries of another type stay FILE_TYPE_UNSPECIFIED; the SDK then skips them.
  const char* file_type = e.type == node::FileType::kFile      ? "FILE_TYPE_FILE"
                          : e.type == node::FileType::kDir     ? "FILE_TYPE_DIRECTORY"
                          : e.type == node::FileType::kSymlink ? "FILE_TYPE_SYMLINK"
                                                               : "FILE_TYPE_UNSPECIFIED";
  json out = {{"name", e.name},
              {"type", file_type},
              {"path", e.path},
              {"size", std::to_string(e.size)},
              {"mode", e.mode & 07777},
              {"permissions", PermissionString(type, e.mode & 07777)},
              {"owner", OwnerName(e.uid)},
              {"group", OwnerName(e.gid)}};
  if (!e.mtime.empty()) out["modifiedTime"] = e.mtime;
  return out;
}

Result<std::string> ResolvePath(const std::string& path, const std::string& home) {
  if (path.empty()) return InvalidArgument("path is empty");
  if (path.size() > 4096) return InvalidArgument("path exceeds 4096 bytes");
  if (path.find('\0') != std::string::npos) return InvalidArgument("path contains a NUL byte");
  if (path[0] == '/') return path;
  if (path == "~") return home;
  if (path.compare(0, 2, "~/") == 0) return home + path.substr(1);
  std::string rel = path.compare(0, 2, "./") == 0 ? path.substr(2) : path;
  std::string out = home + "/" + rel;
  if (out.size() > 4096) return InvalidArgument("path exceeds 4096 bytes");
  return out;
}

Result<std::string> StringField(const json& msg, const char* name, size_t max_len) {
  const json* v = Member(msg, name);
  if (v == nullptr) return std::string();
  if (!v->is_string()) return InvalidArgument(std::string("field '") + name + "' must be a string");
  const std::string& s = v->get_ref<const std::string&>();
  if (s.size() > max_len) return InvalidArgument(std::string("field '") + name + "' is too long");
  return s;
}

Result<Selector> SelectorField(const json& msg, const char* name) {
  const json* v = Member(msg, name);
  if (v == nullptr || !v->is_object()) return InvalidArgument(std::string("field '") + name + "' must select a process");
  Selector s;
  if (const json* pid = Member(*v, "pid")) {
    if (!AsUint(*pid) || *AsUint(*pid) > UINT32_MAX) return InvalidArgument("process pid must be a uint32");
    s.pid = static_cast<uint32_t>(*AsUint(*pid));
    return s;
  }
  ASSIGN_OR_RETURN(s.tag, StringField(*v, "tag", 256));
  if (s.tag.empty()) return InvalidArgument("process selector needs 'pid' or 'tag'");
  return s;
}

Result<std::map<std::string, std::string>> StringMapField(const json& msg, const char* name, size_t max_entries,
                                                          size_t max_len) {
  std::map<std::string, std::string> out;
  const json* v = Member(msg, name);
  if (v == nullptr) return out;
  if (!v->is_object()) return InvalidArgument(std::string("field '") + name + "' must be an object");
  if (v->size() > max_entries) return InvalidArgument(std::string("field '") + name + "' has too many entries");
  for (auto it = v->begin(); it != v->end(); ++it) {
    if (!it.value().is_string()) return InvalidArgument(std::string("field '") + name + "' values must be strings");
    const std::string& val = it.value().get_ref<const std::string&>();
    if (it.key().size() > max_len || val.size() > max_len) {
      return InvalidArgument(std::string("field '") + name + "' has an oversized entry");
    }
    out[it.key()] = val;
  }
  return out;
}

Result<std::string> BytesField(const json& msg, const char* name, size_t max_decoded) {
  ASSIGN_OR_RETURN(std::string text, StringField(msg, name, max_decoded / 3 * 4 + 8));
  // proto3 JSON accepts URL-safe and unpadded base64; normalize to the strict form.
  for (char& c : text) {
    if (c == '-') c = '+';
    if (c == '_') c = '/';
  }
  while (text.size() % 4 != 0) text += '=';
  auto out = Base64Decode(text);
  if (!out.ok()) return InvalidArgument(std::string("field '") + name + "' is not valid base64");
  return out;
}

}  // namespace space::e2b
