#include "storage/context_tar.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace space::storage {
namespace {

// One ustar header (with checksum) plus the data padded to 512 bytes.
std::string Member(const std::string& name, char type, const std::string& data = "", const std::string& link = "",
                   int mode = 0644) {
  const std::string h = UstarHeader(name, type, static_cast<uint32_t>(mode), 0, 0, data.size(), link);
  std::string padded = data;
  padded.resize((data.size() + 511) / 512 * 512, '\0');
  return h + padded;
}

std::string End() { return std::string(1024, '\0'); }

TEST(ContextTarTest, ListsFilesDirsAndLinks) {
  std::string tar = Member("./", '5') + Member("./app/", '5') + Member("./app/main.py", '0', "print(1)\n") +
                    Member("./app/link", '2', "", "main.py") + End();
  auto members = ListTar(tar);
  ASSERT_TRUE(members.ok()) << members.status().ToString();
  ASSERT_EQ(members->size(), 4u);
  EXPECT_EQ((*members)[0].path, ".");
  EXPECT_EQ((*members)[2].path, "app/main.py");
  EXPECT_EQ((*members)[2].data, "print(1)\n");
  EXPECT_EQ((*members)[3].link, "main.py");
}

TEST(ContextTarTest, ConcatenatesTarballsIntoOne) {
  const std::string a = Member("app/", '5') + Member("app/a.txt", '0', "A") + End();
  const std::string b = Member("config.txt", '0', std::string(700, 'c')) + End() + End();  // extra end blocks
  auto both = ConcatTars({a, b}, 1 << 20);
  ASSERT_TRUE(both.ok()) << both.status().ToString();
  auto members = ListTar(*both);
  ASSERT_TRUE(members.ok()) << members.status().ToString();
  ASSERT_EQ(members->size(), 3u);
  EXPECT_EQ((*members)[1].data, "A");
  EXPECT_EQ((*members)[2].path, "config.txt");
  EXPECT_EQ((*members)[2].data.size(), 700u);
  // Each part is checked; the result is bounded.
  EXPECT_FALSE(ConcatTars({a, "not a tarball at all"}, 1 << 20).ok());
  EXPECT_EQ(ConcatTars({a, b}, 2048).status().code(), StatusCode::kPayloadTooLarge);
}

TEST(ContextTarTest, RefusesHostileArchives) {
  struct Case {
    const char* what;
    std::string tar;
  } cases[] = {
      {"absolute", Member("/etc/passwd", '0', "x") + End()},
      {"dotdot", Member("a/../../etc/passwd", '0', "x") + End()},
      {"char device", Member("dev/null", '3') + End()},
      {"block device", Member("dev/sda", '4') + End()},
      {"fifo", Member("p", '6') + End()},
      {"hardlink out", Member("h", '1', "", "../../etc/shadow") + End()},
      {"truncated", Member("big", '0', std::string(2000, 'a')).substr(0, 1024)},
      {"bad checksum",
       [] {
         std::string t = Member("a", '0', "x") + End();
         t[0] = 'b';
         return t;
       }()},
      {"empty", std::string()},
      {"symlink without target", Member("s", '2') + End()},
  };
  for (const auto& c : cases) {
    EXPECT_FALSE(ListTar(c.tar).ok()) << c.what;
  }
}

TEST(ContextTarTest, DigestCoversOnlyTheCopiedSource) {
  std::string a = Member("app/x", '0', "1") + Member("other", '0', "2") + End();
  std::string b = Member("app/x", '0', "1") + Member("other", '0', "3") + End();
  std::string c = Member("app/x", '0', "changed") + Member("other", '0', "2") + End();
  auto ma = ListTar(a), mb = ListTar(b), mc = ListTar(c);
  ASSERT_TRUE(ma.ok() && mb.ok() && mc.ok());
  EXPECT_EQ(*ContextDigest(*ma, "app"), *ContextDigest(*mb, "app/"));
  EXPECT_NE(*ContextDigest(*ma, "app"), *ContextDigest(*mc, "app"));
  EXPECT_NE(*ContextDigest(*ma, "."), *ContextDigest(*mb, "."));
  EXPECT_FALSE(ContextDigest(*ma, "missing").ok());
  EXPECT_FALSE(ContextDigest(*ma, "../app").ok());
}

}  // namespace
}  // namespace space::storage
