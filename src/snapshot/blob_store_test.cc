#include "snapshot/blob_store.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "snapshot/local_blob_store.h"
#include "snapshot/test_util.h"

namespace space::snapshot {
namespace {

using testing::TempDir;

const std::string kHex = std::string(62, 'a') + "01";
const std::string kHex2 = "ab" + std::string(62, 'c');

TEST(BlobKeys, Layout) {
  EXPECT_EQ(ObjectKey(kHex2), "objects/ab/" + kHex2);
  EXPECT_EQ(ManifestKey("snap-1"), "manifests/snap-1.json");
  EXPECT_EQ(*HashFromObjectKey(ObjectKey(kHex2)), kHex2);
  EXPECT_EQ(*SnapIdFromManifestKey("manifests/s1.json"), "s1");
  EXPECT_EQ(TemplateKey("app1"), "templates/app1.json");
  EXPECT_EQ(*NameFromTemplateKey("templates/app1.json"), "app1");
  EXPECT_FALSE(SnapIdFromManifestKey("templates/app1.json").ok());
}

TEST(BlobKeys, RejectsEverythingOutsideTheLayout) {
  const char* bad[] = {
      "",
      "objects/",
      "objects/ab/",
      "objects/aa/../../etc/passwd",
      "objects/cd/ab" /* prefix mismatch */,
      "manifests/.json",
      "manifests/../x.json",
      "manifests/a/b.json",
      "manifests/.hidden.json",
      "manifests/-x.json",
      "manifests/x",
      "templates/../x.json",
      "templates/a/b.json",
      "templates/.json",
      "templates/x",
      "/etc/passwd",
      "tmp.123",
  };
  for (const char* k : bad) EXPECT_FALSE(ValidateKey(k).ok()) << k;
  EXPECT_FALSE(ValidateKey("objects/cd/" + kHex2).ok());
  EXPECT_FALSE(ValidateKey("objects/AB/AB" + std::string(62, 'C')).ok());
  EXPECT_TRUE(ValidateKey(ObjectKey(kHex)).ok());
  EXPECT_TRUE(ValidateKey("manifests/a.b_c-1.json").ok());
}

TEST(BlobKeys, SnapIds) {
  EXPECT_TRUE(ValidateSnapId("sbx_7.2024-01").ok());
  for (const char* id : {"", ".", "..", "a/b", "a b", "-rf", "ä"}) EXPECT_FALSE(ValidateSnapId(id).ok()) << id;
  EXPECT_FALSE(ValidateSnapId(std::string(129, 'a')).ok());
}

TEST(LocalBlobStore, PutGetExistsDeleteList) {
  TempDir dir;
  auto store = LocalBlobStore::Open(dir.Sub("store"));
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  BlobStore& s = **store;

  EXPECT_FALSE(*s.Exists(ObjectKey(kHex)));
  EXPECT_EQ(s.Get(ObjectKey(kHex), 100).status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(s.Put(ObjectKey(kHex), "hello").ok());
  ASSERT_TRUE(s.Put(ObjectKey(kHex2), "").ok());
  ASSERT_TRUE(s.Put(ManifestKey("s1"), "{}").ok());
  ASSERT_TRUE(s.Put(TemplateKey("app1"), "{}").ok());
  EXPECT_TRUE(*s.Exists(ObjectKey(kHex)));
  EXPECT_EQ(*s.Get(ObjectKey(kHex), 100), "hello");
  EXPECT_EQ(*s.Get(ObjectKey(kHex2), 100), "");
  EXPECT_EQ(s.Get(ObjectKey(kHex), 4).status().code(), StatusCode::kPayloadTooLarge);
  // Overwrite is atomic replacement.
  ASSERT_TRUE(s.Put(ObjectKey(kHex), "world").ok());
  EXPECT_EQ(*s.Get(ObjectKey(kHex), 100), "world");

  auto objects = s.List("objects/");
  ASSERT_TRUE(objects.ok());
  std::sort(objects->begin(), objects->end());
  EXPECT_EQ(*objects, (std::vector<std::string>{ObjectKey(kHex), ObjectKey(kHex2)}));
  EXPECT_EQ(*s.List("manifests/"), std::vector<std::string>{"manifests/s1.json"});
  EXPECT_EQ(*s.List("templates/"), std::vector<std::string>{"templates/app1.json"});
  EXPECT_EQ(*s.Get(TemplateKey("app1"), 100), "{}");
  EXPECT_EQ(s.List("objects/ab/")->size(), 1u);
  EXPECT_EQ(s.List("")->size(), 4u);

  ASSERT_TRUE(s.Delete(ObjectKey(kHex)).ok());
  ASSERT_TRUE(s.Delete(ObjectKey(kHex)).ok());  // idempotent
  EXPECT_FALSE(*s.Exists(ObjectKey(kHex)));
  EXPECT_EQ(s.Put("objects/../../escape", "x").code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(testing::fs::exists(dir.Sub("escape")));
}

TEST(LocalBlobStore, RemoveStaleTempKeepsYoungOnes) {
  TempDir dir;
  auto store = LocalBlobStore::Open(dir.Sub("store"));
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->Put(ObjectKey(kHex2), "x").ok());
  // What a crash between open and rename leaves: a temp file beside the objects.
  std::string old_tmp = dir.Sub("store/objects/ab/tmp.dead");
  std::string young_tmp = dir.Sub("store/manifests/tmp.live");
  testing::WriteFile(old_tmp, "partial");
  testing::WriteFile(young_tmp, "partial");
  testing::SetMtime(old_tmp, time(nullptr) - 7200, 0);
  auto removed = (*store)->RemoveStaleTemp(3600 * 1000);
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(*removed, 1u);
  EXPECT_FALSE(testing::fs::exists(old_tmp));
  EXPECT_TRUE(testing::fs::exists(young_tmp));
  // Temp files are never listed as keys.
  EXPECT_EQ((*store)->List("")->size(), 1u);
}

}  // namespace
}  // namespace space::snapshot
