#include "snapshot/read_ahead_store.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>

namespace space::snapshot {
namespace {

// Gets take a while; counts how many run at once and which keys were fetched.
class SlowReads : public BlobStore {
 public:
  Status Put(const std::string& key, std::string_view bytes) override {
    data_[key] = std::string(bytes);
    return Status::Ok();
  }
  Result<std::string> Get(const std::string& key, size_t) override {
    int now = ++inside_;
    most_ = std::max(most_.load(), now);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    --inside_;
    ++gets_;
    auto it = data_.find(key);
    if (it == data_.end()) return NotFound(key);
    return it->second;
  }
  Result<bool> Exists(const std::string& key) override { return data_.count(key) != 0; }
  Status Delete(const std::string&) override { return Status::Ok(); }
  Result<std::vector<std::string>> List(std::string_view) override { return std::vector<std::string>{}; }
  Result<uint64_t> RemoveStaleTemp(int64_t) override { return 0; }

  std::map<std::string, std::string> data_;  // written before the reads start
  std::atomic<int> inside_{0}, most_{0}, gets_{0};
};

std::string Key(int i) {
  std::string hex = std::to_string(i);
  return ObjectKey(std::string(64 - hex.size(), 'b') + hex);
}

TEST(ReadAheadStore, FetchesAheadInOrderBoundedAndHandsOutEachOnce) {
  SlowReads inner;
  std::vector<std::string> order;
  for (int i = 0; i < 12; ++i) {
    inner.data_[Key(i)] = "v" + std::to_string(i);
    order.push_back(Key(i));
  }
  order.push_back(Key(99));  // missing: its failure is handed out like a value
  ReadAheadStore ahead(&inner, order, 3, 1024);
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  EXPECT_EQ(inner.gets_.load(), 3) << "no more than depth ahead of the reader";
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 12; ++i) {
    auto got = ahead.Get(Key(i), 1024);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(*got, "v" + std::to_string(i));
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(12 * 20)) << "fetches overlapped";
  EXPECT_EQ(ahead.Get(Key(99), 1024).status().code(), StatusCode::kNotFound);
  EXPECT_GT(inner.most_.load(), 1);
  EXPECT_LE(inner.most_.load(), 4) << "the fetchers, and the reader once it caught up";
  // Handed out once: asked again, it is fetched again.
  const int before = inner.gets_.load();
  EXPECT_EQ(*ahead.Get(Key(0), 1024), "v0");
  EXPECT_EQ(inner.gets_.load(), before + 1);
}

}  // namespace
}  // namespace space::snapshot
