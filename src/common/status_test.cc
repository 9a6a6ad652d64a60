#include "common/status.h"

#include <gtest/gtest.h>

#include "common/random.h"
#include "common/result.h"

namespace space {
namespace {

TEST(StatusTest, ErrnoMapsToCodeAndNamesCall) {
  struct Case {
    int err;
    StatusCode code;
  } cases[] = {{ENOENT, StatusCode::kNotFound},       {EEXIST, StatusCode::kConflict},
               {EPERM, StatusCode::kPermissionDenied}, {ENOSPC, StatusCode::kResourceExhausted},
               {EIO, StatusCode::kInternal},           {ELOOP, StatusCode::kInvalidArgument}};
  for (const auto& c : cases) {
    Status s = ErrnoStatus("mount", "/sbx/7/root", c.err);
    EXPECT_EQ(s.code(), c.code) << s.ToString();
    EXPECT_NE(s.message().find("mount /sbx/7/root: "), std::string::npos) << s.message();
  }
}

TEST(StatusTest, CodesMapToApiWordsAndHttp) {
  EXPECT_EQ(StatusCodeWord(StatusCode::kInvalidArgument), "invalid_argument");
  EXPECT_EQ(StatusCodeHttp(StatusCode::kConflict), 409);
  EXPECT_EQ(StatusCodeHttp(StatusCode::kPayloadTooLarge), 413);
}

Result<int> Half(int x) {
  if (x % 2) return InvalidArgument("odd");
  return x / 2;
}
Result<int> Quarter(int x) {
  ASSIGN_OR_RETURN(int h, Half(x));
  return Half(h);
}

TEST(ResultTest, PropagatesErrors) {
  EXPECT_EQ(*Quarter(8), 2);
  EXPECT_FALSE(Quarter(6).ok());
  EXPECT_EQ(Quarter(6).status().message(), "odd");
}

TEST(RandomTest, IdsArePrefixedAndDistinct) {
  std::string a = NewId("sbx"), b = NewId("sbx");
  EXPECT_EQ(a.rfind("sbx_", 0), 0u);
  EXPECT_EQ(a.size(), 26u);
  EXPECT_NE(a, b);
}

}  // namespace
}  // namespace space
