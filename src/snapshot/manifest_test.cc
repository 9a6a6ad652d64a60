#include "snapshot/manifest.h"

#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>

#include "snapshot/chunk_codec.h"

namespace space::snapshot {
namespace {

using nlohmann::json;

const std::string kH1 = std::string(64, 'a');
const std::string kH2 = std::string(64, 'b');

Manifest Valid() {
  Manifest m;
  m.snap_id = "s2";
  m.parent = "s1";
  m.created_at_ms = 1700000000000;
  m.entries.push_back({".", EntryType::kDir, 0755, 0, 0, 0, 1, "", {}});
  m.entries.push_back({"d", EntryType::kDir, 0700, 1000, 1000, 0, -5, "", {}});
  m.entries.push_back({"d/f", EntryType::kFile, 04755, 1, 2, kChunkSize + 1, 3, "", {kH1, kH2}});
  m.entries.push_back({"d/empty", EntryType::kFile, 0600, 1, 2, 0, 3, "", {}});
  m.entries.push_back({"link", EntryType::kSymlink, 0777, 0, 0, 7, 3, "../../x", {}});
  // Linux names are bytes, not UTF-8: spaces, '%', high bytes and newlines must survive.
  m.entries.push_back({"we ird%\xff\n", EntryType::kFile, 0644, 0, 0, 1, 0, "", {kH1}});
  m.total_bytes = kChunkSize + 2;
  m.stored_bytes = 10;
  return m;
}

TEST(Manifest, RoundTrip) {
  Manifest m = Valid();
  ASSERT_TRUE(ValidateManifest(m).ok()) << ValidateManifest(m).ToString();
  auto parsed = ParseManifest(SerializeManifest(m));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->snap_id, "s2");
  EXPECT_EQ(parsed->parent, "s1");
  ASSERT_EQ(parsed->entries.size(), m.entries.size());
  for (size_t i = 0; i < m.entries.size(); ++i) {
    const ManifestEntry& a = m.entries[i];
    const ManifestEntry& b = parsed->entries[i];
    EXPECT_EQ(a.path, b.path);
    EXPECT_EQ(a.type, b.type);
    EXPECT_EQ(a.mode, b.mode);
    EXPECT_EQ(a.uid, b.uid);
    EXPECT_EQ(a.gid, b.gid);
    EXPECT_EQ(a.size, b.size);
    EXPECT_EQ(a.mtime_ns, b.mtime_ns);
    EXPECT_EQ(a.target, b.target);
    EXPECT_EQ(a.chunks, b.chunks);
  }
}

TEST(Manifest, RejectsHostileStructure) {
  struct Case {
    const char* name;
    std::function<void(Manifest&)> mutate;
  };
  const Case cases[] = {
      {"dotdot path", [](Manifest& m) { m.entries[1].path = "../x"; }},
      {"inner dotdot", [](Manifest& m) { m.entries[2].path = "d/../f"; }},
      {"absolute path", [](Manifest& m) { m.entries[1].path = "/etc"; }},
      {"empty component", [](Manifest& m) { m.entries[2].path = "d//f"; }},
      {"trailing slash", [](Manifest& m) { m.entries[1].path = "d/"; }},
      {"NUL in path", [](Manifest& m) { m.entries[2].path = std::string("d/a\0b", 5); }},
      {"long component", [](Manifest& m) { m.entries[2].path = "d/" + std::string(256, 'x'); }},
      {"huge size", [](Manifest& m) { m.entries[2].size = 1ull << 60; }},
      {"bad hash", [](Manifest& m) { m.entries[2].chunks[0] = "zz"; }},
      {"upper-case hash", [](Manifest& m) { m.entries[2].chunks[0] = std::string(64, 'A'); }},
      {"too few chunks", [](Manifest& m) { m.entries[2].chunks.pop_back(); }},
      {"no root", [](Manifest& m) { m.entries.erase(m.entries.begin()); }},
      {"child before parent", [](Manifest& m) { std::swap(m.entries[1], m.entries[2]); }},
      {"parent is a file", [](Manifest& m) { m.entries[3].path = "d/f/x"; }},
      {"parent is a symlink", [](Manifest& m) { m.entries[5].path = "link/passwd"; }},
      {"duplicate", [](Manifest& m) { m.entries[3].path = "d/f"; }},
      {"mode bits", [](Manifest& m) { m.entries[2].mode = 0100644; }},
      {"empty symlink", [](Manifest& m) { m.entries[4].target = ""; }},
      {"dir with size", [](Manifest& m) { m.entries[1].size = 1; }},
      {"total mismatch", [](Manifest& m) { m.total_bytes += 1; }},
      {"bad snap id", [](Manifest& m) { m.snap_id = "../s"; }},
      {"bad parent id", [](Manifest& m) { m.parent = "a/b"; }},
  };
  for (const Case& c : cases) {
    Manifest m = Valid();
    c.mutate(m);
    EXPECT_FALSE(ValidateManifest(m).ok()) << c.name;
    auto parsed = ParseManifest(SerializeManifest(m));
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument) << c.name;
  }
}

TEST(Manifest, RejectsHostileJson) {
  json base = json::parse(SerializeManifest(Valid()));
  struct Case {
    const char* name;
    std::function<void(json&)> mutate;
  };
  const Case cases[] = {
      {"unknown root field", [](json& j) { j["extra"] = 1; }},
      {"unknown entry field", [](json& j) { j["entries"][1]["xattr"] = "x"; }},
      {"missing field", [](json& j) { j["entries"][1].erase("mode"); }},
      {"string size", [](json& j) { j["entries"][2]["size"] = "4"; }},
      {"negative size", [](json& j) { j["entries"][2]["size"] = -1; }},
      {"float mode", [](json& j) { j["entries"][2]["mode"] = 1.5; }},
      {"uid > 32 bits", [](json& j) { j["entries"][2]["uid"] = 1ull << 32; }},
      {"huge size", [](json& j) { j["entries"][2]["size"] = 1ull << 62; }},
      {"escaped NUL", [](json& j) { j["entries"][2]["path"] = "d/a%00"; }},
      {"escaped dotdot", [](json& j) { j["entries"][1]["path"] = "%2E%2E"; }},
      {"truncated escape", [](json& j) { j["entries"][1]["path"] = "d%4"; }},
      {"escaped absolute", [](json& j) { j["entries"][1]["path"] = "%2Fetc"; }},
      {"unknown type", [](json& j) { j["entries"][1]["type"] = "chardev"; }},
      {"dir with chunks", [](json& j) { j["entries"][1]["chunks"] = {std::string(64, 'a')}; }},
      {"file with target", [](json& j) { j["entries"][2]["target"] = "x"; }},
      {"symlink with chunks", [](json& j) { j["entries"][4]["chunks"] = json::array(); }},
      {"chunks not array", [](json& j) { j["entries"][2]["chunks"] = "x"; }},
      {"hash not string", [](json& j) { j["entries"][3]["size"] = 1; j["entries"][3]["chunks"] = {1}; }},
      {"entries not array", [](json& j) { j["entries"] = json::object(); }},
      {"version 2", [](json& j) { j["version"] = 2; }},
      {"root is array", [](json& j) { j = json::array(); }},
  };
  for (const Case& c : cases) {
    json j = base;
    c.mutate(j);
    auto parsed = ParseManifest(j.dump());
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument) << c.name << ": " << j.dump().substr(0, 80);
  }
  for (const char* text : {"", "{", "null", "[1,2", "{\"version\":1}", "\xff\xfe"}) {
    EXPECT_FALSE(ParseManifest(text).ok()) << text;
  }
}

}  // namespace
}  // namespace space::snapshot
