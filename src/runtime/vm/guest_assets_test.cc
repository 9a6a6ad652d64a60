#include "runtime/vm/guest_assets.h"

#include <sys/stat.h>

#include <gtest/gtest.h>

namespace space::runtime::vm {
namespace {

TEST(CpioArchive, NewcLayout) {
  std::string a = CpioArchive({{"dev", S_IFDIR | 0755, "", 0, 0}, {"init", S_IFREG | 0755, "hello", 0, 0},
                               {"dev/console", S_IFCHR | 0600, "", 5, 1}});
  ASSERT_EQ(a.compare(0, 6, "070701"), 0);
  EXPECT_EQ(a.size() % 4, 0u);
  // Header fields are 8 hex digits: the second entry's file size is 5.
  size_t init = a.find("init");
  ASSERT_NE(init, std::string::npos);
  EXPECT_NE(a.find("hello"), std::string::npos);
  EXPECT_NE(a.find("TRAILER!!!"), std::string::npos);
  // The device entry carries rdev 5:1 (fields 10 and 11 of its header).
  size_t dev = a.find("070701", a.find("hello"));
  EXPECT_EQ(a.substr(dev + 6 + 9 * 8, 16), "0000000500000001");
}

}  // namespace
}  // namespace space::runtime::vm
