#include "storage/names.h"

#include <gtest/gtest.h>

#include "common/random.h"

namespace space::storage {
namespace {

TEST(NamesTest, TemplateNames) {
  for (const char* ok : {"base", "busybox", "a", "py3.12-slim_x", "0abc"}) {
    EXPECT_TRUE(ValidateTemplateName(ok).ok()) << ok;
  }
  for (const char* bad : {"", "Base", "-x", ".x", "a/b", "..", "a b", "x\n"}) {
    EXPECT_EQ(ValidateTemplateName(bad).code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_TRUE(ValidateTemplateName(std::string(63, 'a')).ok());
  EXPECT_FALSE(ValidateTemplateName(std::string(64, 'a')).ok());
}

TEST(NamesTest, SnapshotIds) {
  EXPECT_TRUE(ValidateSnapshotId(NewId("snap")).ok());
  EXPECT_TRUE(ValidateSnapshotId("snap_" + std::string(22, 'z')).ok());
  for (std::string bad : {std::string(), std::string("snap_"), "snap_" + std::string(21, 'a'),
                          "snap_" + std::string(23, 'a'), "sbx_" + std::string(23, 'a'),
                          "snap_" + std::string(20, 'a') + "/.", "snap_" + std::string(20, 'a') + "_a",
                          "../" + std::string(24, 'a')}) {
    EXPECT_EQ(ValidateSnapshotId(bad).code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(NamesTest, VolumeNames) {
  EXPECT_TRUE(ValidateVolumeDirName(NewId("vol")).ok());
  EXPECT_TRUE(ValidateVolumeDirName(NewId("vol") + ".ro-sbx_12").ok());
  EXPECT_TRUE(ValidateVolumeDirName("vol_a.sync").ok());
  for (const std::string& bad :
       {std::string(), std::string("vol_"), std::string("vol_a."), std::string("vol_a/b"), std::string("vol_a.b.c"),
        std::string("vol_a./"), std::string(".."), std::string("sbx_1"), std::string("vol_a-b"),
        "vol_" + std::string(65, 'a'), "vol_a." + std::string(81, 'a')}) {
    EXPECT_EQ(ValidateVolumeDirName(bad).code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(NamesTest, Digests) {
  std::string hex(64, 'a');
  Result<std::string> r = DigestHex("sha256:" + hex);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, hex);
  for (std::string bad : {hex, "sha256:" + hex.substr(1), "sha256:" + std::string(64, 'A'),
                          "sha512:" + hex, "sha256:" + hex.substr(1) + "/", "sha256:../" + hex.substr(3)}) {
    EXPECT_FALSE(DigestHex(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace space::storage
