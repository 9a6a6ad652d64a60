// The object-store leases between two "nodes" (two LeaseBlobLocks on one store database).
#include "node/blob_locks.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

namespace space::node {
namespace {

using std::chrono::milliseconds;

class BlobLocksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/blob_locks_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    auto s = store::OpenSqliteStore(dir_ + "/store.db");
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
    options_.ttl_ms = 600;
    options_.wait_ms = 5000;
    options_.backoff_ms = 10;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<BlobLocks> Node(const std::string& name) {
    auto l = LeaseBlobLocks(store_.get(), name, options_);
    EXPECT_TRUE(l.ok()) << l.status().ToString();
    return l.ok() ? std::move(l).value() : nullptr;
  }

  std::string dir_;
  std::unique_ptr<store::Store> store_;
  LeaseOptions options_;
};

TEST_F(BlobLocksTest, SharedHoldersRunTogether) {
  auto a = Node("node-a"), b = Node("node-b");
  auto sa = a->Shared();
  auto sb = b->Shared();
  ASSERT_TRUE(sa.ok() && sb.ok());
  EXPECT_EQ(store_->ListBlobLeases()->size(), 3u) << "the gate and two shared rows";
}

TEST_F(BlobLocksTest, ExclusiveWaitsForEverySharedHolderAndBlocksNewOnes) {
  auto a = Node("node-a"), b = Node("node-b");
  auto held = std::make_unique<Result<BlobLocks::Hold>>(a->Shared());
  ASSERT_TRUE(held->ok());
  std::atomic<bool> exclusive_in{false}, shared_in{false};
  std::thread gc([&] {
    auto x = b->Exclusive();
    ASSERT_TRUE(x.ok()) << x.status().ToString();
    exclusive_in = true;
    std::this_thread::sleep_for(milliseconds(300));
    EXPECT_FALSE(shared_in.load()) << "a shared holder got in beside the exclusive one";
  });
  std::this_thread::sleep_for(milliseconds(1000));  // past a ttl: renewal keeps the shared row
  EXPECT_FALSE(exclusive_in.load()) << "exclusive went ahead while a shared lease was held";
  // A new shared request now waits behind the claimed gate.
  std::thread late([&] {
    auto s = a->Shared();
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    shared_in = true;
  });
  std::this_thread::sleep_for(milliseconds(100));
  held.reset();  // the first export ends
  gc.join();
  late.join();
  EXPECT_TRUE(exclusive_in.load());
  EXPECT_TRUE(shared_in.load());
}

TEST_F(BlobLocksTest, OneExclusiveHolderAtATimeAcrossNodesAndThreads) {
  auto a = Node("node-a"), b = Node("node-b");
  std::atomic<int> inside{0}, most{0};
  std::vector<std::thread> threads;
  threads.reserve(4);
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      BlobLocks* l = i % 2 == 0 ? a.get() : b.get();
      auto x = l->Exclusive();
      ASSERT_TRUE(x.ok()) << x.status().ToString();
      int now = ++inside;
      most = std::max(most.load(), now);
      std::this_thread::sleep_for(milliseconds(50));
      --inside;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(most.load(), 1);
}

TEST_F(BlobLocksTest, ADeadHoldersLeaseRunsOutAndItsRestartDropsItAtOnce) {
  // node-c crashed holding a shared lease and the gate (rows written, nobody renewing).
  auto now = store_->NowMs();
  ASSERT_TRUE(store_->PutBlobLease({"lease-dead", "node-c", *now + options_.ttl_ms}).ok());
  ASSERT_TRUE(*store_->ClaimBlobGate("node-c", *now, *now + options_.ttl_ms));
  auto b = Node("node-b");
  {
    const auto t0 = std::chrono::steady_clock::now();
    auto s = b->Shared();
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    EXPECT_GE(std::chrono::steady_clock::now() - t0, milliseconds(options_.ttl_ms / 2)) << "it waited for the ttl";
  }

  // Crashed again; this time it restarts: its rows go before anyone waits for them.
  now = store_->NowMs();
  ASSERT_TRUE(store_->PutBlobLease({"lease-dead2", "node-c", *now + 60000}).ok());
  auto c = Node("node-c");
  auto rows = store_->ListBlobLeases();
  ASSERT_TRUE(rows.ok());
  for (const auto& r : *rows) EXPECT_NE(r.id, "lease-dead2");
  auto x = c->Exclusive();
  ASSERT_TRUE(x.ok()) << x.status().ToString();
}

TEST_F(BlobLocksTest, GivesUpWithAReasonAfterWaitMs) {
  options_.wait_ms = 200;
  auto a = Node("node-a"), b = Node("node-b");
  auto held = a->Shared();
  ASSERT_TRUE(held.ok());
  auto x = b->Exclusive();
  ASSERT_FALSE(x.ok());
  EXPECT_EQ(x.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(x.status().message().find("still running"), std::string::npos) << x.status().ToString();
  // The gate it claimed while waiting is free again.
  auto s = b->Shared();
  EXPECT_TRUE(s.ok()) << s.status().ToString();
}

}  // namespace
}  // namespace space::node
