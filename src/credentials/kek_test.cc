#include "credentials/kek.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace space::credentials {
namespace {

constexpr char kHex[] = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

class KekTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/kek_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void WriteKey(const std::string& path, const std::string& content, mode_t mode) {
    std::ofstream(path) << content;
    ASSERT_EQ(chmod(path.c_str(), mode), 0);
  }
  std::string dir_;
};

TEST_F(KekTest, EnvOverrideWinsAndIsValidated) {
  auto kek = LoadOrCreateKek(dir_ + "/absent", kHex);
  ASSERT_TRUE(kek.ok()) << kek.status().ToString();
  EXPECT_EQ(kek->data()[0], 0x00);
  EXPECT_EQ(kek->data()[31], 0x1f);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/absent")) << "env key must not create a file";

  for (const char* bad : {"", "abc", "zz0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f",
                          "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f00"}) {
    auto r = LoadOrCreateKek(dir_ + "/absent", bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("SPACE_KEK"), std::string::npos);
  }
}

TEST_F(KekTest, CreatesKeyWithMode0600AndReloadsIt) {
  std::string path = dir_ + "/sub/kek";
  auto first = LoadOrCreateKek(path, nullptr);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  ASSERT_EQ(stat((dir_ + "/sub").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);

  auto second = LoadOrCreateKek(path, nullptr);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(std::memcmp(first->data(), second->data(), Kek::kSize), 0);

  auto other = LoadOrCreateKek(dir_ + "/kek2", nullptr);
  ASSERT_TRUE(other.ok());
  EXPECT_NE(std::memcmp(first->data(), other->data(), Kek::kSize), 0) << "keys must be random";
  // No temp files left behind.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_ + "/sub"), {}), 1);
}

TEST_F(KekTest, ReadsExistingKeyWithTrailingNewline) {
  WriteKey(dir_ + "/kek", std::string(kHex) + "\n", 0400);
  auto kek = LoadOrCreateKek(dir_ + "/kek", nullptr);
  ASSERT_TRUE(kek.ok()) << kek.status().ToString();
  EXPECT_EQ(kek->data()[1], 0x01);
}

TEST_F(KekTest, RefusesLooseModes) {
  for (mode_t mode : {0640, 0604, 0644, 0660, 0700, 0666}) {
    std::string path = dir_ + "/kek" + std::to_string(mode);
    WriteKey(path, kHex, mode);
    auto kek = LoadOrCreateKek(path, nullptr);
    ASSERT_FALSE(kek.ok()) << std::oct << mode;
    EXPECT_EQ(kek.status().code(), StatusCode::kPermissionDenied);
    EXPECT_NE(kek.status().message().find("0600 or stricter"), std::string::npos) << kek.status().message();
    EXPECT_EQ(kek.status().message().find(kHex), std::string::npos) << "error must not echo the key";
  }
}

TEST_F(KekTest, RefusesBadContentSymlinksAndDirectories) {
  WriteKey(dir_ + "/short", "abcd", 0600);
  EXPECT_EQ(LoadOrCreateKek(dir_ + "/short", nullptr).status().code(), StatusCode::kInvalidArgument);
  WriteKey(dir_ + "/long", std::string(kHex) + std::string(kHex), 0600);
  EXPECT_EQ(LoadOrCreateKek(dir_ + "/long", nullptr).status().code(), StatusCode::kInvalidArgument);

  WriteKey(dir_ + "/real", kHex, 0600);
  ASSERT_EQ(symlink((dir_ + "/real").c_str(), (dir_ + "/link").c_str()), 0);
  auto linked = LoadOrCreateKek(dir_ + "/link", nullptr);
  ASSERT_FALSE(linked.ok());
  EXPECT_NE(linked.status().message().find("symlink"), std::string::npos) << linked.status().message();

  ASSERT_EQ(mkdir((dir_ + "/adir").c_str(), 0700), 0);
  EXPECT_FALSE(LoadOrCreateKek(dir_ + "/adir", nullptr).ok());
}

TEST_F(KekTest, RefusesKeyOwnedByAnotherUser) {
  if (geteuid() != 0) GTEST_SKIP() << "chown needs root";
  WriteKey(dir_ + "/kek", kHex, 0600);
  ASSERT_EQ(chown((dir_ + "/kek").c_str(), 12345, 12345), 0);
  auto kek = LoadOrCreateKek(dir_ + "/kek", nullptr);
  ASSERT_FALSE(kek.ok());
  EXPECT_NE(kek.status().message().find("owned by uid 12345"), std::string::npos) << kek.status().message();
}

TEST(KekMove, MovedFromKeyIsZeroed) {
  auto a = Kek::FromHex(std::string(64, 'f'));
  ASSERT_TRUE(a.ok());
  Kek b = std::move(a).value();
  EXPECT_EQ(b.data()[0], 0xff);
  EXPECT_EQ(a->data()[0], 0x00);  // the moved-from copy holds no key material
}

}  // namespace
}  // namespace space::credentials
