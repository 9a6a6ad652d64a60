#include "common/base64.h"

#include <gtest/gtest.h>

namespace space {
namespace {

TEST(Base64Test, MatchesRfc4648VectorsAndIsStrict) {
  struct Case {
    std::string plain, encoded;
  } cases[] = {{"", ""},
               {"f", "Zg=="},
               {"fo", "Zm8="},
               {"foo", "Zm9v"},
               {"foob", "Zm9vYg=="},
               {"fooba", "Zm9vYmE="},
               {"foobar", "Zm9vYmFy"},
               {std::string("\0\xff", 2), "AP8="}};
  for (const auto& c : cases) {
    EXPECT_EQ(Base64Encode(c.plain), c.encoded);
    auto out = Base64Decode(c.encoded);
    ASSERT_TRUE(out.ok()) << c.encoded;
    EXPECT_EQ(*out, c.plain);
  }
  for (const char* bad : {"Zg", "Zg=", "Z===", "Zh==", "Zm9=", "Zm 9", "Zm9v\n", "Zg==Zg==", "Z!==", "=Zg="}) {
    EXPECT_FALSE(Base64Decode(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace space
