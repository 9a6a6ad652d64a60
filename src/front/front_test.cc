// DropToFront in a forked child, as root: what the front can and cannot do afterwards.
#include "front/front.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "common/filtered_child_test_util.h"

namespace space::front {
namespace {

int AsFront(const std::string& empty_dir, const std::function<int()>& body) {
  return testing::InRestrictedChild([&] { return DropToFront(empty_dir); }, body, /*no_new_privs=*/false);
}

class FrontDropTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root";
    char tmpl[] = "/tmp/front-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    parent_ = tmpl;
    empty_ = parent_ + "/empty";
  }
  void TearDown() override {
    if (!parent_.empty()) {
      ::rmdir(empty_.c_str());
      ::rmdir(parent_.c_str());
    }
  }
  std::string parent_, empty_;
};

TEST_F(FrontDropTest, EndsUnprivilegedInAnEmptyRoot) {
  int code = AsFront(empty_, []() -> int {
    if (::getuid() != kFrontUid || ::geteuid() != kFrontUid || ::getgid() != kFrontGid) return 1;
    if (::setresuid(0, 0, 0) == 0) return 2;
    if (::access("/etc/passwd", F_OK) == 0) return 3;  // the host's files are out of sight
    if (::mkdir("/x", 0700) == 0) return 4;              // and the empty root is not writable
    // No new sockets, so no outgoing connections; no other program.
    if (::socket(AF_INET, SOCK_STREAM, 0) >= 0 || errno != EPERM) return 5;
    if (::socket(AF_UNIX, SOCK_STREAM, 0) >= 0 || errno != EPERM) return 6;
    char* argv[] = {const_cast<char*>("/bin/true"), nullptr};
    if (::execve("/bin/true", argv, nullptr) == 0 || errno != EPERM) return 7;
    if (::kill(1, 0) == 0 || errno != EPERM) return 8;
    // What it needs: Unix socketpairs to the node, threads.
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return 9;
    bool ran = false;
    std::thread([&] { ran = true; }).join();
    if (!ran) return 10;
    return 0;
  });
  EXPECT_EQ(code, 0) << "the numbered check in the front failed";
}

TEST_F(FrontDropTest, RefusesAWritableRoot) {
  ASSERT_EQ(::mkdir(empty_.c_str(), 0777), 0);
  ASSERT_EQ(::chmod(empty_.c_str(), 0777), 0);
  EXPECT_EQ(AsFront(empty_, [] { return 0; }), 91);
}

}  // namespace
}  // namespace space::front
