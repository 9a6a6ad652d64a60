#include "guest/passwd.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>

#include "common/syscall.h"

namespace space::guest {
namespace {

constexpr char kPasswd[] =
    "root:x:0:0:root:/root:/bin/bash\n"
    "# comment\n"
    "\n"
    "daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n"
    "broken:x:notanumber:1::/:/bin/sh\n"
    "short:x:5:5\n"
    "huge:x:4294967295:1::/:/bin/sh\n"
    "user:x:1000:1000:User,,,:/home/user:/bin/bash\r\n"
    "digits:x:2000:2000::/home/digits:/bin/sh\n"
    "1000:x:3000:3000::/home/odd:/bin/sh\n";

constexpr char kGroup[] =
    "root:x:0:\n"
    "sudo:x:27:user,other\n"
    "docker:x:999:other,user\n"
    "users:x:100:\n"
    "bad:x:zz:user\n"
    "user:x:1000:\n";

class PasswdFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/passwd_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ASSERT_TRUE(WriteFileAtomic(dir_ + "/passwd", kPasswd, 0644).ok());
    ASSERT_TRUE(WriteFileAtomic(dir_ + "/group", kGroup, 0644).ok());
  }
  void TearDown() override {
    ::unlink((dir_ + "/passwd").c_str());
    ::unlink((dir_ + "/group").c_str());
    ::rmdir(dir_.c_str());
  }
  std::string dir_;
};

TEST(ParsePasswdTest, SkipsMalformedLines) {
  auto users = ParsePasswd(kPasswd);
  std::vector<std::string> names;
  for (const auto& u : users) names.push_back(u.name);
  EXPECT_EQ(names, (std::vector<std::string>{"root", "daemon", "user", "digits", "1000"}));
  EXPECT_EQ(users[2].home, "/home/user");
  EXPECT_EQ(users[2].shell, "/bin/bash");  // CR stripped
}

TEST(ParsePasswdTest, SkipsOverlongLines) {
  std::string content = "long:x:1:1:" + std::string(kMaxLineBytes, 'g') + ":/:/bin/sh\nok:x:2:2::/:/bin/sh";
  auto users = ParsePasswd(content);
  ASSERT_EQ(users.size(), 1u);
  EXPECT_EQ(users[0].name, "ok");
}

TEST(ParseGroupsOfTest, FindsMemberships) {
  EXPECT_EQ(ParseGroupsOf(kGroup, "user"), (std::vector<gid_t>{27, 999}));
  EXPECT_EQ(ParseGroupsOf(kGroup, "other"), (std::vector<gid_t>{27, 999}));
  EXPECT_TRUE(ParseGroupsOf(kGroup, "nobody").empty());
  EXPECT_TRUE(ParseGroupsOf(kGroup, "").empty());
}

TEST_F(PasswdFilesTest, ResolveUserTable) {
  struct Case {
    std::string spec;
    bool ok;
    uid_t uid;
    gid_t gid;
    std::string home;
  };
  const Case cases[] = {
      {"root", true, 0, 0, "/root"},
      {"user", true, 1000, 1000, "/home/user"},
      {"0", true, 0, 0, "/root"},
      {"2000", true, 2000, 2000, "/home/digits"},
      {"1000", true, 3000, 3000, "/home/odd"},  // a name match wins over a uid match
      {"4242", true, 4242, 4242, "/"},          // unknown uid: synthesized
      {"nosuchuser", false, 0, 0, ""},
      {"", false, 0, 0, ""},
      {"99999999999", false, 0, 0, ""},
      {"broken", false, 0, 0, ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.spec);
    auto u = ResolveUser(c.spec, dir_ + "/passwd");
    ASSERT_EQ(u.ok(), c.ok) << u.status().ToString();
    if (!c.ok) continue;
    EXPECT_EQ(u->uid, c.uid);
    EXPECT_EQ(u->gid, c.gid);
    EXPECT_EQ(u->home, c.home);
  }
}

TEST_F(PasswdFilesTest, MissingFilesStillResolveRootAndUids) {
  auto root = ResolveUser("root", dir_ + "/missing");
  ASSERT_TRUE(root.ok());
  EXPECT_EQ(root->uid, 0u);
  auto uid = ResolveUser("1234", dir_ + "/missing");
  ASSERT_TRUE(uid.ok());
  EXPECT_EQ(uid->gid, 1234u);
  EXPECT_EQ(ResolveUser("user", dir_ + "/missing").status().code(), StatusCode::kNotFound);
  auto groups = SupplementaryGroups(*uid, dir_ + "/missing");
  ASSERT_TRUE(groups.ok());
  EXPECT_EQ(*groups, (std::vector<gid_t>{1234}));
}

TEST_F(PasswdFilesTest, SupplementaryGroupsStartWithPrimary) {
  auto u = ResolveUser("user", dir_ + "/passwd");
  ASSERT_TRUE(u.ok());
  auto groups = SupplementaryGroups(*u, dir_ + "/group");
  ASSERT_TRUE(groups.ok());
  EXPECT_EQ(*groups, (std::vector<gid_t>{1000, 27, 999}));
}

TEST_F(PasswdFilesTest, RefusesHugeFiles) {
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/passwd", std::string(kMaxDbBytes + 1, '\n'), 0644).ok());
  EXPECT_FALSE(ResolveUser("root", dir_ + "/passwd").ok());
}

}  // namespace
}  // namespace space::guest
