#include "node/warm_pools.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace space::node {
namespace {

// A factory that makes pooled sandboxes out of nothing, failing while `fail` is set.
struct FakeFactory {
  std::atomic<int> made{0};
  std::atomic<int> destroyed{0};
  std::atomic<bool> fail{false};

  SandboxFactory Get() {
    return {.make = [this](const std::string& tmpl) -> Result<std::shared_ptr<WarmSandbox>> {
              if (fail) return Unavailable("no room");
              auto w = std::make_shared<WarmSandbox>();
              w->pool = tmpl;
              w->live = std::make_shared<LiveSandbox>();
              w->live->id = "sbx_" + std::to_string(++made);
              return w;
            },
            .destroy = [this](const std::shared_ptr<WarmSandbox>&) { ++destroyed; }};
  }
};

bool WaitFor(const std::function<bool()>& cond) {
  for (int i = 0; i < 500; ++i) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

TEST(WarmPoolsTest, FillsToTargetAndHandsOut) {
  FakeFactory f;
  WarmPools pools({{"busybox", 3}}, f.Get());
  pools.Start();
  ASSERT_TRUE(WaitFor([&] { return f.made == 3; })) << f.made;
  auto w = pools.Take("busybox", kWarmMemoryMb);
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->pool, "busybox");
  EXPECT_EQ(pools.Take("base", kWarmMemoryMb), nullptr);  // no pool for it
  EXPECT_EQ(pools.Take("busybox", 1024), nullptr);        // other memory: served cold
  ASSERT_TRUE(WaitFor([&] { return f.made == 4; }));      // refilled after the hand-out
  pools.Stop();
  EXPECT_EQ(f.destroyed, 3);  // the ready ones end with the pools; the handed-out one is not theirs
  const std::string metrics = pools.MetricsText();
  EXPECT_NE(metrics.find("busybox"), std::string::npos);
}

TEST(WarmPoolsTest, ACreateInFlightHoldsRefillsBack) {
  FakeFactory f;
  WarmPools pools({{"busybox", 1}}, f.Get());
  pools.CreateStarted();
  pools.Start();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(f.made, 0) << "a refill ran beside a create in flight";
  pools.CreateFinished();
  EXPECT_TRUE(WaitFor([&] { return f.made == 1; }));
}

TEST(WarmPoolsTest, AFailingRefillBacksOffAndRecovers) {
  FakeFactory f;
  f.fail = true;
  WarmPools pools({{"busybox", 1}}, f.Get());
  pools.Start();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(pools.Take("busybox", kWarmMemoryMb), nullptr);
  f.fail = false;
  EXPECT_TRUE(WaitFor([&] { return f.made == 1; }));
  EXPECT_NE(pools.MetricsText().find("refill_failures"), std::string::npos);
}

TEST(WarmPoolsTest, NoPoolsNoThread) {
  FakeFactory f;
  WarmPools pools({}, f.Get());
  pools.Start();
  EXPECT_EQ(pools.Take("busybox", kWarmMemoryMb), nullptr);
  EXPECT_EQ(pools.MetricsText(), "");
}

}  // namespace
}  // namespace space::node
