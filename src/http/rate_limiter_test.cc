#include "http/rate_limiter.h"

#include <gtest/gtest.h>

namespace space::api {
namespace {

constexpr int64_t kSec = 1'000'000'000;

TEST(RateLimiterTest, BurstThenRefill) {
  RateLimiter l({/*rate_per_s=*/10, /*burst=*/5});
  for (int i = 0; i < 5; ++i) EXPECT_EQ(l.Take("k", 0), 0) << i;
  EXPECT_EQ(l.Take("k", 0), 1);  // empty: one token is 0.1 s away, rounded up to 1 s
  EXPECT_EQ(l.Take("k", kSec / 10), 0);
  EXPECT_EQ(l.Take("k", kSec / 10), 1);
  EXPECT_EQ(l.Take("k", 100 * kSec), 0);  // refills, but never beyond the burst
  for (int i = 0; i < 4; ++i) EXPECT_EQ(l.Take("k", 100 * kSec), 0) << i;
  EXPECT_EQ(l.Take("k", 100 * kSec), 1);
}

TEST(RateLimiterTest, KeysAreIndependent) {
  RateLimiter l({1, 1});
  EXPECT_EQ(l.Take("a", 0), 0);
  EXPECT_EQ(l.Take("a", 0), 1);
  EXPECT_EQ(l.Take("b", 0), 0);
}

TEST(RateLimiterTest, RetryAfterCoversSlowRates) {
  RateLimiter l({0.1, 1});  // one request per 10 s
  EXPECT_EQ(l.Take("k", 0), 0);
  EXPECT_EQ(l.Take("k", 0), 10);
  EXPECT_EQ(l.Take("k", 5 * kSec), 5);
}

TEST(RateLimiterTest, ZeroRateDisables) {
  RateLimiter l({0, 0});
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(l.Take("k", 0), 0);
}

TEST(RateLimiterTest, TableStaysBoundedAndKeepsBusyKeys) {
  RateLimiter l({0.001, 2}, /*max_keys=*/4);
  EXPECT_EQ(l.Take("busy", 0), 0);
  EXPECT_EQ(l.Take("busy", 0), 0);
  // A key that keeps hammering stays limited while one-off keys come and go.
  for (int i = 1; i <= 100; ++i) {
    EXPECT_EQ(l.Take("k" + std::to_string(i), i * kSec / 1000), 0) << i;
    EXPECT_GT(l.Take("busy", i * kSec / 1000), 0) << i;
  }
}

TEST(RateLimiterTest, ParseSpec) {
  RateLimit r;
  ASSERT_TRUE(ParseRateLimit("50", &r));
  EXPECT_EQ(r.rate_per_s, 50);
  EXPECT_EQ(r.burst, 100);
  ASSERT_TRUE(ParseRateLimit("2.5:7", &r));
  EXPECT_EQ(r.rate_per_s, 2.5);
  EXPECT_EQ(r.burst, 7);
  ASSERT_TRUE(ParseRateLimit("0", &r));
  EXPECT_EQ(r.rate_per_s, 0);
  for (const char* bad : {"", "x", "-1", "5:", ":5", "5:0", "1e99", "nan", "5:x"}) {
    EXPECT_FALSE(ParseRateLimit(bad, &r)) << bad;
  }
}

}  // namespace
}  // namespace space::api
