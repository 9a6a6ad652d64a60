#include "node/guest_files.h"

#include <gtest/gtest.h>

namespace space::node {
namespace {

nlohmann::json Good() {
  return {{"name", "a.txt"}, {"path", "/tmp/a.txt"}, {"type", "file"},
          {"size", 3u},      {"mode", 0644u},        {"mtime", "2026-01-01T00:00:00Z"},
          {"uid", 1000u},    {"gid", 1000u}};
}

TEST(GuestFilesTest, AGoodEntryParses) {
  auto e = ParseFileEntry(Good());
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->name, "a.txt");
  EXPECT_EQ(e->type, FileType::kFile);
  EXPECT_EQ(e->size, 3u);
  EXPECT_EQ(e->mode, 0644u);
  EXPECT_EQ(e->uid, 1000);
  EXPECT_EQ(FileTypeName(e->type), "file");
}

// The guest is untrusted: every field is checked, and a bad one refuses the whole entry.
TEST(GuestFilesTest, HostileEntriesAreRefused) {
  struct Case {
    const char* what;
    std::function<void(nlohmann::json&)> spoil;
  };
  const Case cases[] = {
      {"not an object", [](nlohmann::json& j) { j = nlohmann::json::array(); }},
      {"no name", [](nlohmann::json& j) { j.erase("name"); }},
      {"name not a string", [](nlohmann::json& j) { j["name"] = 7; }},
      {"huge path", [](nlohmann::json& j) { j["path"] = std::string(5000, 'a'); }},
      {"unknown type", [](nlohmann::json& j) { j["type"] = "device"; }},
      {"negative size", [](nlohmann::json& j) { j["size"] = -1; }},
      {"mode a string", [](nlohmann::json& j) { j["mode"] = "0644"; }},
      {"no mtime", [](nlohmann::json& j) { j.erase("mtime"); }},
  };
  for (const Case& c : cases) {
    nlohmann::json j = Good();
    c.spoil(j);
    auto e = ParseFileEntry(j);
    ASSERT_FALSE(e.ok()) << c.what;
    EXPECT_EQ(e.status().code(), StatusCode::kInternal) << c.what;
  }
}

TEST(GuestFilesTest, OwnersAreOptionalAndBounded) {
  nlohmann::json j = Good();
  j.erase("uid");
  j["gid"] = 1ull << 40;
  auto e = ParseFileEntry(j);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->uid, -1);
  EXPECT_EQ(e->gid, -1);
  j = Good();
  j["mode"] = 0100755u;  // the type bits are dropped
  EXPECT_EQ(ParseFileEntry(j)->mode, 0755u);
}

}  // namespace
}  // namespace space::node
