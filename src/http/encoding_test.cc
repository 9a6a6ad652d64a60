#include "http/encoding.h"

#include <gtest/gtest.h>

namespace space::api {
namespace {

TEST(Base64Test, RoundTripsAllLengths) {
  std::string s;
  for (int i = 0; i < 300; ++i) {
    auto enc = Base64Encode(s);
    auto dec = Base64Decode(enc);
    ASSERT_TRUE(dec.ok()) << enc;
    EXPECT_EQ(*dec, s);
    s += static_cast<char>(i * 37);
  }
  EXPECT_EQ(Base64Encode("hi"), "aGk=");
  EXPECT_FALSE(Base64Decode("a$==").ok());
  EXPECT_FALSE(Base64Decode("aGk").ok());  // padding is required
  EXPECT_FALSE(Base64Decode("a").ok());
}

TEST(Utf8Test, ValidatesAndSplits) {
  struct Case {
    std::string s;
    bool valid;
  } cases[] = {{"plain", true},           {"\xc3\xa9", true},       {"\xe2\x82\xac", true},
               {"\xf0\x9f\x98\x80", true}, {"\xc3", false},          {"\xff", false},
               {"\xed\xa0\x80", false},    {"\xc0\xaf", false},      {"\xe0\x80\xaf", false}};
  for (const auto& c : cases) EXPECT_EQ(IsValidUtf8(c.s), c.valid) << c.s;
  std::string euro = "ab\xe2\x82\xac";
  EXPECT_EQ(Utf8CompletePrefix(euro), euro.size());
  EXPECT_EQ(Utf8CompletePrefix(euro.substr(0, 4)), 2u);
  EXPECT_EQ(Utf8CompletePrefix(euro.substr(0, 3)), 2u);
  EXPECT_EQ(Utf8CompletePrefix("\xff"), 1u);  // invalid, not incomplete: passed on as is
}

}  // namespace
}  // namespace space::api
