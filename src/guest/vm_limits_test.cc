#include "guest/vm_limits.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace space::guest {
namespace {

TEST(GuestLimits, ParsesTheOomKillCounter) {
  EXPECT_EQ(ParseOomKills("nr_free_pages 100\noom_kill 3\nnuma_hit 7\n"), 3u);
  EXPECT_EQ(ParseOomKills("oom_kill 12"), 12u);  // no trailing newline
  EXPECT_EQ(ParseOomKills("nr_free_pages 100\n"), 0u);
  EXPECT_EQ(ParseOomKills("xoom_kill 5\noom_kill_other 9\n"), 0u);  // only the exact key
  EXPECT_EQ(ParseOomKills(""), 0u);
}

TEST(GuestLimits, ReadsThisKernelsCountersAndARootFilesystem) {
  auto limits = ReadGuestLimits("/");
  ASSERT_TRUE(limits.ok()) << limits.status().ToString();
  EXPECT_GT(limits->disk_total, 0u);
  EXPECT_LE(limits->disk_avail, limits->disk_total);
  auto j = nlohmann::json::parse(EncodeGuestLimits(*limits));
  EXPECT_EQ(j["disk_total"].get<uint64_t>(), limits->disk_total);
  EXPECT_EQ(j["oom_kills"].get<uint64_t>(), limits->oom_kills);
  EXPECT_FALSE(ReadGuestLimits("/nonexistent-root").ok());
}

}  // namespace
}  // namespace space::guest
