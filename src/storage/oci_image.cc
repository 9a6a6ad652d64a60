#include "storage/oci_image.h"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "storage/context_tar.h"
#include "storage/digest.h"
#include "storage/gzip.h"

namespace space::storage {
namespace {

constexpr size_t kMaxJsonBytes = 4u << 20;  // a manifest, an index or a config

Result<nlohmann::json> ParseJson(std::string_view text, const std::string& what) {
  if (text.size() > kMaxJsonBytes) return InvalidArgument("image: " + what + " is larger than 4 MiB");
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("image: " + what + " is not valid JSON");
  return j;
}

std::string StringAt(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

class Archive {
 public:
  Status Load(std::string_view archive) {
    ASSIGN_OR_RETURN(std::vector<TarMember> members, ListTar(archive));
    for (const auto& m : members) {
      if (m.type == '0') files_[m.path] = m.data;
    }
    return Status::Ok();
  }
  bool Has(const std::string& path) const { return files_.count(path) > 0; }
  Result<std::string_view> File(const std::string& path) const {
    auto it = files_.find(path);
    if (it == files_.end()) return InvalidArgument("image: " + path.substr(0, 200) + " is missing");
    return it->second;
  }
  // A content-addressed blob of an OCI layout, checked against its digest.
  Result<std::string_view> Blob(const std::string& digest) const {
    if (digest.size() != 71 || digest.compare(0, 7, "sha256:") != 0 ||
        digest.find_first_not_of("0123456789abcdef", 7) != std::string::npos) {
      return InvalidArgument("image: '" + digest.substr(0, 100) + "' is not a sha256 digest");
    }
    ASSIGN_OR_RETURN(std::string_view data, File("blobs/sha256/" + digest.substr(7)));
    if (Sha256Hex(data) != digest) return InvalidArgument("image: blob " + digest + " does not match its digest");
    return data;
  }

 private:
  std::map<std::string, std::string_view> files_;
};

Status ReadConfig(std::string_view text, ImageConfig* out) {
  ASSIGN_OR_RETURN(nlohmann::json j, ParseJson(text, "the image config"));
  if (!j.is_object()) return InvalidArgument("image: the config is not an object");
  auto c = j.find("config");
  if (c == j.end() || !c->is_object()) return Status::Ok();
  auto strings = [&](const char* key, std::vector<std::string>* into) {
    auto it = c->find(key);
    if (it == c->end() || !it->is_array()) return;
    for (const auto& v : *it) {
      if (v.is_string()) into->push_back(v.get<std::string>());
    }
  };
  strings("Env", &out->env);
  strings("Entrypoint", &out->cmd);
  strings("Cmd", &out->cmd);
  out->working_dir = StringAt(*c, "WorkingDir");
  out->user = StringAt(*c, "User");
  return Status::Ok();
}

Status AddLayer(std::string_view data, size_t max_bytes, size_t* total, std::vector<std::string>* layers) {
  if (layers->size() >= kMaxImageLayers) return InvalidArgument("image: more than 128 layers");
  std::string tar;
  if (data.size() >= 2 && static_cast<unsigned char>(data[0]) == 0x1f && static_cast<unsigned char>(data[1]) == 0x8b) {
    ASSIGN_OR_RETURN(tar, Inflate(data, max_bytes - *total, "image: a layer"));
  } else if (data.size() >= 4 && data.substr(0, 4) == std::string_view("\x28\xb5\x2f\xfd", 4)) {
    return InvalidArgument("image: zstd layers are not supported (gzip or uncompressed only)");
  } else {
    tar = std::string(data);
  }
  *total += tar.size();
  if (*total > max_bytes) return InvalidArgument("image: the layers inflate to more than the cap");
  layers->push_back(std::move(tar));
  return Status::Ok();
}

Result<Image> ReadOci(const Archive& a, size_t max_bytes) {
  ASSIGN_OR_RETURN(std::string_view index_text, a.File("index.json"));
  ASSIGN_OR_RETURN(nlohmann::json doc, ParseJson(index_text, "index.json"));
  // index.json, or a nested index, names the manifest: the first one (one platform).
  for (int depth = 0;; ++depth) {
    if (!doc.is_object()) return InvalidArgument("image: an index or manifest is not an object");
    auto m = doc.find("manifests");
    if (m == doc.end()) break;  // a manifest
    if (depth >= 3 || !m->is_array() || m->empty() || !(*m)[0].is_object()) {
      return InvalidArgument("image: an index names no manifest");
    }
    ASSIGN_OR_RETURN(std::string_view next, a.Blob(StringAt((*m)[0], "digest")));
    ASSIGN_OR_RETURN(doc, ParseJson(next, "a manifest"));
  }
  Image image;
  auto config = doc.find("config");
  if (config == doc.end() || !config->is_object()) return InvalidArgument("image: the manifest has no config");
  ASSIGN_OR_RETURN(std::string_view config_text, a.Blob(StringAt(*config, "digest")));
  RETURN_IF_ERROR(ReadConfig(config_text, &image.config));
  auto layers = doc.find("layers");
  if (layers == doc.end() || !layers->is_array()) return InvalidArgument("image: the manifest has no layers");
  size_t total = 0;
  for (const auto& l : *layers) {
    if (!l.is_object()) return InvalidArgument("image: a layer entry is not an object");
    ASSIGN_OR_RETURN(std::string_view data, a.Blob(StringAt(l, "digest")));
    RETURN_IF_ERROR(AddLayer(data, max_bytes, &total, &image.layers));
  }
  return image;
}

Result<Image> ReadDockerSave(const Archive& a, size_t max_bytes) {
  ASSIGN_OR_RETURN(std::string_view text, a.File("manifest.json"));
  ASSIGN_OR_RETURN(nlohmann::json doc, ParseJson(text, "manifest.json"));
  if (!doc.is_array() || doc.empty() || !doc[0].is_object())
    return InvalidArgument("image: manifest.json names no image");
  const nlohmann::json& m = doc[0];
  Image image;
  ASSIGN_OR_RETURN(std::string_view config_text, a.File(StringAt(m, "Config")));
  RETURN_IF_ERROR(ReadConfig(config_text, &image.config));
  auto layers = m.find("Layers");
  if (layers == m.end() || !layers->is_array()) return InvalidArgument("image: manifest.json has no Layers");
  size_t total = 0;
  for (const auto& l : *layers) {
    if (!l.is_string()) return InvalidArgument("image: a layer path is not a string");
    ASSIGN_OR_RETURN(std::string_view data, a.File(l.get<std::string>()));
    RETURN_IF_ERROR(AddLayer(data, max_bytes, &total, &image.layers));
  }
  return image;
}

// --- writing ---------------------------------------------------------------------------------

std::string PaxRecord(const std::string& key, const std::string& value) {
  const std::string body = " " + key + "=" + value + "\n";
  size_t len = body.size() + 1;
  while (std::to_string(len).size() + body.size() != len) len = std::to_string(len).size() + body.size();
  return std::to_string(len) + body;
}

void Pad(std::string* out) { out->resize((out->size() + 511) / 512 * 512, '\0'); }

void WriteMember(std::string* out, const TarMember& m) {
  const uint64_t size = m.type == '0' ? m.data.size() : 0;
  std::string pax;
  if (m.path.size() > 100) pax += PaxRecord("path", m.path);
  if (m.link.size() > 100) pax += PaxRecord("linkpath", m.link);
  if (m.uid > 07777777) pax += PaxRecord("uid", std::to_string(m.uid));
  if (m.gid > 07777777) pax += PaxRecord("gid", std::to_string(m.gid));
  if (!pax.empty()) {
    *out += UstarHeader("PaxHeader", 'x', 0644, 0, 0, pax.size(), "");
    *out += pax;
    Pad(out);
  }
  *out += UstarHeader(m.path, m.type, m.mode, m.uid, m.gid, size, m.link);
  if (size) {
    out->append(m.data.data(), m.data.size());
    Pad(out);
  }
}

std::string Dirname(const std::string& p) {
  size_t slash = p.rfind('/');
  return slash == std::string::npos ? "." : p.substr(0, slash);
}

std::string Join(const std::string& dir, const std::string& base) { return dir == "." ? base : dir + "/" + base; }

// Removes `path` and everything below it.
void Erase(std::map<std::string, TarMember>* tree, const std::string& path) {
  tree->erase(path);
  const std::string prefix = path + "/";
  for (auto it = tree->lower_bound(prefix); it != tree->end() && it->first.compare(0, prefix.size(), prefix) == 0;) {
    it = tree->erase(it);
  }
}

}  // namespace

Result<Image> ReadImage(std::string_view archive, size_t max_bytes) {
  Archive a;
  RETURN_IF_ERROR(a.Load(archive));
  if (a.Has("index.json")) return ReadOci(a, max_bytes);
  if (a.Has("manifest.json")) return ReadDockerSave(a, max_bytes);
  return InvalidArgument("image: neither an OCI image layout (index.json) nor a docker save tarball (manifest.json)");
}

Result<std::string> FlattenLayers(const std::vector<std::string>& layers,
                                  const std::map<std::string, std::string>& extra_files) {
  std::map<std::string, TarMember> tree;  // by path; ordered, so a parent precedes its children
  for (size_t i = 0; i < layers.size(); ++i) {
    ASSIGN_OR_RETURN(std::vector<TarMember> members, ListTar(layers[i]));
    // Whiteouts act on the layers below, so they go first.
    for (const auto& m : members) {
      const std::string dir = Dirname(m.path);
      const std::string base = m.path.substr(m.path.rfind('/') == std::string::npos ? 0 : m.path.rfind('/') + 1);
      if (base == ".wh..wh..opq") {
        if (dir == ".") {
          tree.clear();
        } else {
          TarMember keep = tree.count(dir) ? tree[dir] : TarMember{};
          const bool had = tree.count(dir) > 0;
          Erase(&tree, dir);
          if (had) tree[dir] = keep;
        }
      } else if (base.rfind(".wh.", 0) == 0) {
        Erase(&tree, Join(dir, base.substr(4)));
      }
    }
    for (const auto& m : members) {
      const std::string base = m.path.substr(m.path.rfind('/') == std::string::npos ? 0 : m.path.rfind('/') + 1);
      if (m.path == "." || base.rfind(".wh.", 0) == 0) continue;
      // Nothing may land below a symlink or a file: extracting it would follow the link.
      for (std::string p = Dirname(m.path); p != "."; p = Dirname(p)) {
        auto parent = tree.find(p);
        if (parent != tree.end() && parent->second.type != '5') {
          return InvalidArgument("image: layer " + std::to_string(i + 1) + " puts " + m.path.substr(0, 200) +
                                 " below " + (parent->second.type == '2' ? "a symlink" : "a non-directory"));
        }
      }
      auto existing = tree.find(m.path);
      if (existing != tree.end() && existing->second.type == '5' && m.type != '5') Erase(&tree, m.path);
      tree[m.path] = m;
    }
  }
  for (const auto& [path, contents] : extra_files) {
    TarMember m;
    m.path = path;
    m.type = '0';
    m.mode = 0644;
    m.data = contents;
    tree[path] = m;
  }
  std::string out;
  for (const auto& [path, m] : tree) {
    if (m.type != '1') WriteMember(&out, m);
  }
  // Hard links last, each to a regular file of the final tree.
  for (const auto& [path, m] : tree) {
    if (m.type != '1') continue;
    auto target = tree.find(m.link);
    if (target == tree.end() || target->second.type != '0') {
      return InvalidArgument("image: hard link " + path.substr(0, 200) + " points at " + m.link.substr(0, 200) +
                             ", which is not a file of the image");
    }
    WriteMember(&out, m);
  }
  out.append(1024, '\0');
  return out;
}

}  // namespace space::storage
