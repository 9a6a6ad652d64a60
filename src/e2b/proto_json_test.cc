#include "e2b/proto_json.h"

#include <gtest/gtest.h>

namespace space::e2b {
namespace {

TEST(ProtoJson, EntryInfoFromAFileEntry) {
  node::FileEntry f{.name = "hello.txt",
                    .path = "/home/user/hello.txt",
                    .type = node::FileType::kFile,
                    .size = 10,
                    .mode = 420,
                    .mtime = "2026-11-30T00:05:58.476Z",
                    .uid = 1000,
                    .gid = 1000};
  auto e = EntryInfoJson(f);
  EXPECT_EQ(e["type"], "FILE_TYPE_FILE");
  EXPECT_EQ(e["size"], "10");  // int64 is a string in proto3 JSON
  EXPECT_EQ(e["mode"], 420);
  EXPECT_EQ(e["permissions"], "-rw-r--r--");
  EXPECT_EQ(e["owner"], "user");
  EXPECT_EQ(e["modifiedTime"], "2026-11-30T00:05:58.476Z");
}

TEST(ProtoJson, EntryInfoOfAnUnknownOwnerAndType) {
  node::FileEntry f{.name = "s", .type = node::FileType::kOther, .uid = -1, .gid = 4242};
  auto e = EntryInfoJson(f);
  EXPECT_EQ(e["type"], "FILE_TYPE_UNSPECIFIED");
  EXPECT_EQ(e["owner"], "");
  EXPECT_EQ(e["group"], "4242");
  EXPECT_FALSE(e.contains("modifiedTime"));
}

TEST(ProtoJson, Permissions) {
  EXPECT_EQ(PermissionString("dir", 0755), "drwxr-xr-x");
  EXPECT_EQ(PermissionString("symlink", 0777), "lrwxrwxrwx");
}

TEST(ProtoJson, ResolvePath) {
  EXPECT_EQ(*ResolvePath("/etc/hosts", "/home/user"), "/etc/hosts");
  EXPECT_EQ(*ResolvePath("a/b", "/home/user"), "/home/user/a/b");
  EXPECT_EQ(*ResolvePath("./a", "/home/user"), "/home/user/a");
  EXPECT_EQ(*ResolvePath("~/x", "/root"), "/root/x");
  EXPECT_FALSE(ResolvePath("", "/root").ok());
  EXPECT_FALSE(ResolvePath(std::string("a\0b", 3), "/root").ok());
  EXPECT_FALSE(ResolvePath(std::string(5000, 'a'), "/root").ok());
}

TEST(ProtoJson, FieldsAreTypeChecked) {
  nlohmann::json m = {{"process", {{"pid", 42}}}, {"bad", {{"pid", -1}}}, {"tag", {{"tag", "t"}}},
                      {"input", "aGk"}, {"url", "-_8="}, {"envs", {{"A", "1"}}}, {"envs_bad", {{"A", 1}}}};
  EXPECT_EQ(SelectorField(m, "process")->pid, 42u);
  EXPECT_FALSE(SelectorField(m, "bad").ok());
  EXPECT_EQ(SelectorField(m, "tag")->tag, "t");
  EXPECT_FALSE(SelectorField(m, "missing").ok());
  EXPECT_EQ(*BytesField(m, "input", 100), "hi");  // unpadded base64 is accepted
  EXPECT_EQ(*BytesField(m, "url", 100), "\xfb\xff");  // URL-safe alphabet too
  EXPECT_FALSE(BytesField({{"x", "!!!!"}}, "x", 100).ok());
  EXPECT_EQ(StringMapField(m, "envs", 10, 100)->at("A"), "1");
  EXPECT_FALSE(StringMapField(m, "envs_bad", 10, 100).ok());
  EXPECT_FALSE(StringField({{"s", std::string(10, 'x')}}, "s", 5).ok());
}

}  // namespace
}  // namespace space::e2b
