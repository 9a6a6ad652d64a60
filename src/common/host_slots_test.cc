#include "common/host_slots.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace space {
namespace {

TEST(HostSlotsTest, SlotsAreExclusiveAcrossHoldersAndReleased) {
  char tmpl[] = "/tmp/uid_slots.XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  HostSlots a(tmpl), b(tmpl);
  auto s0 = a.Acquire(-1);
  ASSERT_TRUE(s0.ok());
  EXPECT_EQ(*s0, 0);
  auto s1 = b.Acquire(0);  // preferred but held by another holder (flock is per open file)
  ASSERT_TRUE(s1.ok());
  EXPECT_EQ(*s1, 1);
  a.Release(0);
  EXPECT_EQ(*b.Acquire(0), 0);
  EXPECT_EQ(HostSlots::UidBase(0) % 65536, 0u);
  EXPECT_GE(HostSlots::UidBase(0), 1u << 20);
  ASSERT_EQ(std::system((std::string("rm -rf ") + tmpl).c_str()), 0);
}

}  // namespace
}  // namespace space
