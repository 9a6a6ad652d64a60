#include "snapshot/write_behind_store.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>

namespace space::snapshot {
namespace {

// An in-memory store whose Puts take a while, and fail for one key.
class SlowStore : public BlobStore {
 public:
  Status Put(const std::string& key, std::string_view bytes) override {
    int now = ++inside_;
    most_ = std::max(most_.load(), now);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    --inside_;
    if (key == fail_key) return Unavailable("put " + key + ": HTTP 503");
    std::lock_guard<std::mutex> lock(mu_);
    data_[key] = std::string(bytes);
    return Status::Ok();
  }
  Result<std::string> Get(const std::string& key, size_t) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = data_.find(key);
    if (it == data_.end()) return NotFound(key);
    return it->second;
  }
  Result<bool> Exists(const std::string& key) override {
    std::lock_guard<std::mutex> lock(mu_);
    return data_.count(key) != 0;
  }
  Status Delete(const std::string&) override { return Status::Ok(); }
  Result<std::vector<std::string>> List(std::string_view) override { return std::vector<std::string>{}; }
  Result<uint64_t> RemoveStaleTemp(int64_t) override { return 0; }

  std::string fail_key;
  std::atomic<int> inside_{0}, most_{0};
  std::mutex mu_;
  std::map<std::string, std::string> data_;
};

std::string Key(int i) {
  std::string hex = std::to_string(i);
  return ObjectKey(std::string(64 - hex.size(), 'a') + hex);
}

TEST(WriteBehindStore, UploadsInParallelAndCommitsOnlyAfterEveryObject) {
  SlowStore inner;
  {
    WriteBehindStore wb(&inner, 4);
    for (int i = 0; i < 16; ++i) ASSERT_TRUE(wb.Put(Key(i), "v" + std::to_string(i)).ok());
    EXPECT_TRUE(*wb.Exists(Key(15))) << "queued counts as there";
    ASSERT_TRUE(wb.Put(ManifestKey("s1"), "{}").ok());
    EXPECT_EQ(inner.data_.size(), 17u) << "every object landed before the manifest";
  }
  EXPECT_GT(inner.most_.load(), 1) << "uploads overlapped";
  EXPECT_LE(inner.most_.load(), 4);
}

TEST(WriteBehindStore, AFailedObjectKeepsTheManifestOut) {
  SlowStore inner;
  inner.fail_key = Key(3);
  WriteBehindStore wb(&inner, 2);
  for (int i = 0; i < 6; ++i) (void)wb.Put(Key(i), "v");
  Status st = wb.Put(ManifestKey("s1"), "{}");
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
  EXPECT_NE(st.message().find("HTTP 503"), std::string::npos) << st.ToString();
  EXPECT_FALSE(*inner.Exists(ManifestKey("s1")));
  EXPECT_FALSE(*wb.Exists(Key(3)));
}

}  // namespace
}  // namespace space::snapshot
