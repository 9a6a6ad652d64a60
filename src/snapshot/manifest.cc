#include "snapshot/manifest.h"

#include <initializer_list>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "snapshot/blob_store.h"
#include "snapshot/chunk_codec.h"

namespace space::snapshot {
namespace {

using nlohmann::json;

constexpr int kVersion = 1;

Status Bad(const std::string& why) { return InvalidArgument("manifest " + why); }

std::string PercentEncode(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    auto b = static_cast<unsigned char>(c);
    if (b < 0x21 || b >= 0x7f || b == '%') {
      out += '%';
      out += kHex[b >> 4];
      out += kHex[b & 15];
    } else {
      out += c;
    }
  }
  return out;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

Result<std::string> PercentDecode(std::string_view s, const std::string& field) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    if (i + 2 >= s.size()) return Bad(field + ": truncated %-escape");
    int hi = HexValue(s[i + 1]), lo = HexValue(s[i + 2]);
    if (hi < 0 || lo < 0) return Bad(field + ": bad %-escape");
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

// Checks `obj` is an object holding exactly `required` plus any of `optional`.
Status CheckKeys(const json& obj, std::initializer_list<const char*> required,
                 std::initializer_list<const char*> optional, const std::string& where) {
  if (!obj.is_object()) return Bad(where + ": not an object");
  size_t seen = 0;
  for (const char* k : required) {
    if (!obj.contains(k)) return Bad(where + ": missing \"" + k + "\"");
    ++seen;
  }
  for (const char* k : optional) seen += obj.contains(k) ? 1 : 0;
  if (seen != obj.size()) return Bad(where + ": unknown field");
  return Status::Ok();
}

Result<uint64_t> GetU64(const json& obj, const char* key, uint64_t max, const std::string& where) {
  const json& v = obj.at(key);
  if (!v.is_number_unsigned()) return Bad(where + ": \"" + key + "\" must be a non-negative integer");
  uint64_t x = v.get<uint64_t>();
  if (x > max) return Bad(where + ": \"" + key + "\" out of range");
  return x;
}

Result<int64_t> GetI64(const json& obj, const char* key, const std::string& where) {
  const json& v = obj.at(key);
  if (!v.is_number_integer()) return Bad(where + ": \"" + key + "\" must be an integer");
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    return Bad(where + ": \"" + key + "\" out of range");
  }
  return v.get<int64_t>();
}

Result<std::string> GetString(const json& obj, const char* key, const std::string& where) {
  const json& v = obj.at(key);
  if (!v.is_string()) return Bad(where + ": \"" + key + "\" must be a string");
  return v.get<std::string>();
}

Result<ManifestEntry> ParseEntry(const json& j, size_t index) {
  std::string where = "entry " + std::to_string(index);
  RETURN_IF_ERROR(
      CheckKeys(j, {"path", "type", "mode", "uid", "gid", "size", "mtime_ns"}, {"target", "chunks", "ctime_ns"}, where));
  ManifestEntry e;
  ASSIGN_OR_RETURN(std::string path, GetString(j, "path", where));
  ASSIGN_OR_RETURN(e.path, PercentDecode(path, where + " path"));
  ASSIGN_OR_RETURN(std::string type, GetString(j, "type", where));
  if (type == "dir") {
    e.type = EntryType::kDir;
  } else if (type == "file") {
    e.type = EntryType::kFile;
  } else if (type == "symlink") {
    e.type = EntryType::kSymlink;
  } else {
    return Bad(where + ": unknown type");
  }
  ASSIGN_OR_RETURN(uint64_t mode, GetU64(j, "mode", 07777, where));
  ASSIGN_OR_RETURN(uint64_t uid, GetU64(j, "uid", UINT32_MAX, where));
  ASSIGN_OR_RETURN(uint64_t gid, GetU64(j, "gid", UINT32_MAX, where));
  e.mode = static_cast<uint32_t>(mode);
  e.uid = static_cast<uint32_t>(uid);
  e.gid = static_cast<uint32_t>(gid);
  ASSIGN_OR_RETURN(e.size, GetU64(j, "size", kMaxFileSize, where));
  ASSIGN_OR_RETURN(e.mtime_ns, GetI64(j, "mtime_ns", where));
  if (j.contains("ctime_ns")) {
    ASSIGN_OR_RETURN(e.ctime_ns, GetI64(j, "ctime_ns", where));
  }
  // Fields that do not belong to the type are rejected rather than ignored.
  if (j.contains("target") != (e.type == EntryType::kSymlink)) return Bad(where + ": \"target\" is for symlinks only");
  if (j.contains("chunks") != (e.type == EntryType::kFile)) return Bad(where + ": \"chunks\" is for files only");
  if (j.contains("target")) {
    ASSIGN_OR_RETURN(std::string target, GetString(j, "target", where));
    ASSIGN_OR_RETURN(e.target, PercentDecode(target, where + " target"));
  }
  if (j.contains("chunks")) {
    const json& chunks = j.at("chunks");
    if (!chunks.is_array()) return Bad(where + ": \"chunks\" must be an array");
    // Bounded before copying: the count must match the (already bounded) size anyway.
    if (chunks.size() != ChunkCount(e.size)) return Bad(where + ": chunk count does not match size");
    for (const json& c : chunks) {
      if (!c.is_string()) return Bad(where + ": chunk hash must be a string");
      e.chunks.push_back(c.get<std::string>());
    }
  }
  return e;
}

Result<Manifest> ParseChecked(const json& j) {
  RETURN_IF_ERROR(CheckKeys(
      j, {"version", "snap_id", "parent", "created_at_ms", "total_bytes", "stored_bytes", "entries"}, {}, "root"));
  ASSIGN_OR_RETURN(uint64_t version, GetU64(j, "version", UINT32_MAX, "root"));
  if (version != kVersion) return Bad("version " + std::to_string(version) + " is not supported");
  Manifest m;
  ASSIGN_OR_RETURN(m.snap_id, GetString(j, "snap_id", "root"));
  ASSIGN_OR_RETURN(m.parent, GetString(j, "parent", "root"));
  ASSIGN_OR_RETURN(m.created_at_ms, GetI64(j, "created_at_ms", "root"));
  ASSIGN_OR_RETURN(m.total_bytes, GetU64(j, "total_bytes", UINT64_MAX, "root"));
  ASSIGN_OR_RETURN(m.stored_bytes, GetU64(j, "stored_bytes", UINT64_MAX, "root"));
  const json& entries = j.at("entries");
  if (!entries.is_array()) return Bad("\"entries\" must be an array");
  if (entries.size() > kMaxEntries) return Bad("has too many entries");
  m.entries.reserve(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    ASSIGN_OR_RETURN(ManifestEntry e, ParseEntry(entries[i], i));
    m.entries.push_back(std::move(e));
  }
  RETURN_IF_ERROR(ValidateManifest(m));
  return m;
}

std::string ParentPath(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

}  // namespace

std::string_view EntryTypeName(EntryType t) {
  switch (t) {
    case EntryType::kDir: return "dir";
    case EntryType::kFile: return "file";
    case EntryType::kSymlink: return "symlink";
  }
  return "?";
}

uint64_t ChunkCount(uint64_t size) { return (size + kChunkSize - 1) / kChunkSize; }

Status ValidateEntryPath(std::string_view path) {
  if (path == ".") return Status::Ok();
  if (path.empty() || path.size() > kMaxPathBytes) return Bad("path length out of range");
  if (path.find('\0') != std::string_view::npos) return Bad("path holds a NUL byte");
  if (path.front() == '/') return Bad("path is absolute");
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    std::string_view comp = path.substr(start, end - start);
    if (comp.empty() || comp == "." || comp == "..") return Bad("path has an empty, '.' or '..' component");
    if (comp.size() > kMaxNameBytes) return Bad("path component too long");
    start = end + 1;
  }
  return Status::Ok();
}

Status ValidateManifest(const Manifest& m) {
  RETURN_IF_ERROR(ValidateSnapId(m.snap_id));
  if (!m.parent.empty()) RETURN_IF_ERROR(ValidateSnapId(m.parent));
  if (m.entries.empty() || m.entries[0].path != "." || m.entries[0].type != EntryType::kDir) {
    return Bad("must start with the root directory \".\"");
  }
  // path -> is a directory; a parent must be listed (as a directory) before its children,
  // which also rules out duplicates and lets the restorer create entries in order.
  std::unordered_map<std::string, bool> seen;
  seen.reserve(m.entries.size());
  uint64_t total = 0;
  for (size_t i = 0; i < m.entries.size(); ++i) {
    const ManifestEntry& e = m.entries[i];
    std::string where = "entry " + std::to_string(i) + " ";
    RETURN_IF_ERROR(ValidateEntryPath(e.path).Annotate(where));
    if (i > 0) {
      if (e.path == ".") return Bad(where + "repeats the root");
      auto parent = seen.find(ParentPath(e.path));
      if (parent == seen.end() || !parent->second) return Bad(where + "comes before its parent directory");
    }
    if (!seen.emplace(e.path, e.type == EntryType::kDir).second) return Bad(where + "is a duplicate path");
    if (e.mode > 07777) return Bad(where + "mode out of range");
    if (e.size > kMaxFileSize) return Bad(where + "size out of range");
    switch (e.type) {
      case EntryType::kDir:
        if (e.size != 0 || !e.target.empty() || !e.chunks.empty()) return Bad(where + "directory with data");
        break;
      case EntryType::kSymlink:
        if (e.target.empty() || e.target.size() > kMaxPathBytes || e.target.find('\0') != std::string::npos ||
            e.size != e.target.size() || !e.chunks.empty()) {
          return Bad(where + "bad symlink");
        }
        break;
      case EntryType::kFile:
        if (!e.target.empty()) return Bad(where + "file with a target");
        if (e.chunks.size() != ChunkCount(e.size)) return Bad(where + "chunk count does not match size");
        for (const auto& c : e.chunks) {
          if (!IsSha256Hex(c)) return Bad(where + "chunk hash is not 64 lowercase hex digits");
        }
        total += e.size;  // Cannot overflow: <= 4 M entries of <= 1 TiB.
        break;
    }
  }
  if (total != m.total_bytes) return Bad("total_bytes does not match its entries");
  return Status::Ok();
}

std::string SerializeManifest(const Manifest& m) {
  json entries = json::array();
  for (const ManifestEntry& e : m.entries) {
    json j = {{"path", PercentEncode(e.path)}, {"type", EntryTypeName(e.type)}, {"mode", e.mode},
              {"uid", e.uid},  {"gid", e.gid}, {"size", e.size}, {"mtime_ns", e.mtime_ns},
              {"ctime_ns", e.ctime_ns}};
    if (e.type == EntryType::kSymlink) j["target"] = PercentEncode(e.target);
    if (e.type == EntryType::kFile) j["chunks"] = e.chunks;
    entries.push_back(std::move(j));
  }
  json root = {{"version", kVersion},         {"snap_id", m.snap_id},         {"parent", m.parent},
               {"created_at_ms", m.created_at_ms}, {"total_bytes", m.total_bytes}, {"stored_bytes", m.stored_bytes},
               {"entries", std::move(entries)}};
  // Everything is ASCII after percent-encoding, so dump cannot hit invalid UTF-8.
  return root.dump();
}

Result<Manifest> ParseManifest(std::string_view text) {
  if (text.size() > kMaxManifestBytes) return Bad("larger than " + std::to_string(kMaxManifestBytes) + " bytes");
  json j = json::parse(text, /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Bad("is not valid JSON");
  // Every access above is type-checked first; this catch is the boundary for anything
  // nlohmann still throws (e.g. allocation), so no exception leaves the component.
  try {
    return ParseChecked(j);
  } catch (const std::exception& e) {
    return Bad(std::string("rejected: ") + e.what());
  }
}

Result<Manifest> LoadManifest(BlobStore& store, std::string_view snap_id) {
  RETURN_IF_ERROR(ValidateSnapId(snap_id));
  ASSIGN_OR_RETURN(std::string text, store.Get(ManifestKey(snap_id), kMaxManifestBytes));
  ASSIGN_OR_RETURN(Manifest m, ParseManifest(text));
  if (m.snap_id != snap_id) return Bad("stored as \"" + std::string(snap_id) + "\" names itself \"" + m.snap_id + "\"");
  return m;
}

}  // namespace space::snapshot
