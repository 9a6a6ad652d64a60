#include "e2b/multipart.h"

#include <gtest/gtest.h>

namespace space::e2b {
namespace {

TEST(Multipart, BoundaryFromContentType) {
  EXPECT_EQ(*MultipartBoundary("multipart/form-data; boundary=----formdata-undici-0101"), "----formdata-undici-0101");
  EXPECT_EQ(*MultipartBoundary("multipart/form-data; boundary=\"a b\""), "a b");
  EXPECT_FALSE(MultipartBoundary("application/json").ok());
  EXPECT_FALSE(MultipartBoundary("multipart/form-data").ok());
  EXPECT_FALSE(MultipartBoundary("multipart/form-data; boundary=" + std::string(71, 'x')).ok());
}

TEST(Multipart, ParsesTheSdkUpload) {
  // The exact shape undici's FormData sends for files.write (reference §3.5).
  std::string body =
      "------formdata-undici-010140031996\r\nContent-Disposition: form-data; name=\"file\"; "
      "filename=\"/home/user/hello.txt\"\r\nContent-Type: application/octet-stream\r\n\r\nhello file\r\n"
      "------formdata-undici-010140031996\r\nContent-Disposition: form-data; name=\"file\"; "
      "filename=\"dir/b.bin\"\r\n\r\n\r\n--x\r\n"
      "------formdata-undici-010140031996--\r\n";
  auto parts = ParseMultipart(body, "----formdata-undici-010140031996");
  ASSERT_TRUE(parts.ok()) << parts.status().message();
  ASSERT_EQ(parts->size(), 2u);
  EXPECT_EQ((*parts)[0].name, "file");
  EXPECT_EQ((*parts)[0].filename, "/home/user/hello.txt");
  EXPECT_EQ((*parts)[0].data, "hello file");
  EXPECT_EQ((*parts)[1].filename, "dir/b.bin");
  EXPECT_EQ((*parts)[1].data, "\r\n--x");  // a near-delimiter inside the data stays data
}

TEST(Multipart, RefusesHostileBodies) {
  const char* bad[] = {
      "",
      "--b",                                                     // no delimiter line end
      "--b\r\nContent-Disposition: form-data; name=\"f\"\r\n",   // headers never end
      "--b\r\nContent-Disposition: form-data; name=\"f\"\r\n\r\ndata",  // part never ends
      "--bX\r\n\r\n\r\n--b--",
  };
  for (const char* b : bad) EXPECT_FALSE(ParseMultipart(b, "b").ok()) << b;
  std::string many;
  for (size_t i = 0; i <= kMaxParts; ++i) many += "--b\r\nX: y\r\n\r\nd\r\n";
  many += "--b--";
  EXPECT_FALSE(ParseMultipart(many, "b").ok());
}

}  // namespace
}  // namespace space::e2b
