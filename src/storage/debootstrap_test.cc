#include "storage/debootstrap.h"

#include <gtest/gtest.h>

namespace space::storage {
namespace {

struct MirrorCase {
  const char* what;
  std::vector<AptSource> sources;
  std::string want;  // empty: not found
};

TEST(DebootstrapTest, FindDebianMirror) {
  const MirrorCase cases[] = {
      {"deb822 with commented snapshot URI",
       {{"debian.sources",
         "Types: deb\n# http://snapshot.example/archive\nURIs: http://mirror.example/debian\n"
         "Suites: bookworm bookworm-updates\nComponents: main\n\n"
         "Types: deb\nURIs: http://mirror.example/debian-security\nSuites: bookworm-security\nComponents: main\n"}},
       "http://mirror.example/debian"},
      {"deb822 skips disabled and deb-src stanzas",
       {{"a.sources",
         "Types: deb\nURIs: http://off.example/debian\nSuites: bookworm\nComponents: main\nEnabled: no\n\n"
         "Types: deb-src\nURIs: http://src.example/debian\nSuites: bookworm\nComponents: main\n\n"
         "Types: deb\nURIs: file:/local https://on.example/debian\nSuites: bookworm\nComponents: main contrib\n"}},
       "https://on.example/debian"},
      {"one-line with options",
       {{"sources.list",
         "# deb http://commented.example/debian bookworm main\n"
         "deb http://other.example/debian bullseye main\n"
         "deb [arch=amd64 signed-by=/k.gpg] http://one.example/debian bookworm main contrib\n"}},
       "http://one.example/debian"},
      {"one-line wrong component", {{"sources.list", "deb http://x.example/debian bookworm contrib\n"}}, ""},
      {"first file wins",
       {{"sources.list", "deb http://first.example/debian bookworm main\n"},
        {"b.sources", "Types: deb\nURIs: http://second.example/debian\nSuites: bookworm\nComponents: main\n"}},
       "http://first.example/debian"},
      {"nothing", {}, ""},
  };
  for (const auto& c : cases) {
    Result<std::string> got = FindDebianMirror(c.sources, "bookworm");
    if (c.want.empty()) {
      EXPECT_EQ(got.status().code(), StatusCode::kNotFound) << c.what;
    } else {
      ASSERT_TRUE(got.ok()) << c.what << ": " << got.status().ToString();
      EXPECT_EQ(*got, c.want) << c.what;
    }
  }
}

}  // namespace
}  // namespace space::storage
