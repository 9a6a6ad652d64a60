// SpawnHelper with a user of its own: the helper starts as that uid in a user namespace whose
// maps the caller writes, and holds no capability anywhere after exec.
#include "common/helper_spawn.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include <gtest/gtest.h>

#include "common/syscall.h"
#include "common/unique_fd.h"

namespace space {
namespace {

constexpr uid_t kUid = 19 * 65536;  // a slot base, as the node uses

// What `script` printed on fd 3, run by /bin/sh as a helper of `user`.
Result<std::string> RunAs(const HelperUser& user, const std::string& script) {
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return ErrnoStatus("pipe2", "out", errno);
  UniqueFd r(out[0]), w(out[1]);
  UniqueFd sh(::open("/bin/sh", O_RDONLY | O_CLOEXEC));
  HelperSpec spec;
  spec.args = {"sh", "-c", script};
  spec.fds = {{w.get(), 3}};
  spec.exe_fd = sh.get();
  spec.user = user;
  ASSIGN_OR_RETURN(pid_t pid, SpawnHelper(spec));
  w.reset();
  std::string text;
  char buf[4096];
  ssize_t n;
  while ((n = RetryEintr([&] { return ::read(r.get(), buf, sizeof buf); })) > 0) text.append(buf, static_cast<size_t>(n));
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return Internal("helper status " + std::to_string(status));
  return text;
}

std::string Field(const std::string& status, const std::string& name) {
  size_t at = status.find("\n" + name + ":\t");
  if (at == std::string::npos) return "<none>";
  at += name.size() + 3;
  return status.substr(at, status.find('\n', at) - at);
}

HelperUser MappedUser(bool* called) {
  HelperUser user;
  user.uid = kUid;
  user.map_ids = [called](int pidfd, pid_t pid) {
    *called = pidfd >= 0;
    const std::string map = std::to_string(kUid) + " " + std::to_string(kUid) + " 1\n";
    RETURN_IF_ERROR(WriteSmallFile("/proc/" + std::to_string(pid) + "/uid_map", map));
    return WriteSmallFile("/proc/" + std::to_string(pid) + "/gid_map", map);
  };
  return user;
}

TEST(HelperSpawnTest, OwnUserStartsAsItsUidWithNoCapabilityAnywhere) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (id maps)";
  bool called = false;
  auto out = RunAs(MappedUser(&called), "cat /proc/self/status /proc/self/uid_map >&3");
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_TRUE(called);
  const std::string u = std::to_string(kUid);
  EXPECT_EQ(Field(*out, "Uid"), u + "\t" + u + "\t" + u + "\t" + u);
  EXPECT_EQ(Field(*out, "Gid"), u + "\t" + u + "\t" + u + "\t" + u);
  EXPECT_EQ(Field(*out, "Groups").find_first_not_of(' '), std::string::npos) << Field(*out, "Groups");
  for (const char* cap : {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"}) {
    EXPECT_EQ(Field(*out, cap), "0000000000000000") << cap;
  }
  // Its namespace maps its own id and nothing else (the last thing printed).
  EXPECT_NE(out->find(std::to_string(kUid) + " " + std::string(10 - u.size(), ' ') + u + "          1\n"),
            std::string::npos) << *out;
}

TEST(HelperSpawnTest, AChildWhoseMapsFailIsKilledAndReaped) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root";
  HelperUser user;
  user.uid = kUid;
  user.map_ids = [](int, pid_t) { return PermissionDenied("no map for you"); };
  auto out = RunAs(user, "echo ran >&3");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kPermissionDenied);
  // Reaped already: no child is left to wait for.
  EXPECT_EQ(::waitpid(-1, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

// A parent killed between the spawn and its go (kill -9 of the node mid-create): the child
// reads EOF and ends, instead of waiting forever on a pipe whose write end it held itself.
TEST(HelperSpawnTest, AChildWhoseParentDiesBeforeItsGoEnds) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root";
  int report[2];
  ASSERT_EQ(::pipe2(report, O_CLOEXEC), 0);
  UniqueFd report_r(report[0]), report_w(report[1]);
  pid_t parent = ::fork();
  ASSERT_GE(parent, 0);
  if (parent == 0) {
    HelperUser user;
    user.uid = kUid;
    user.map_ids = [&](int, pid_t pid) -> Status {
      (void)!::write(report_w.get(), &pid, sizeof pid);
      ::_exit(0);  // dies before it says go
    };
    HelperSpec spec;
    spec.args = {"sh", "-c", "sleep 60"};
    spec.user = user;
    (void)SpawnHelper(spec);
    ::_exit(1);
  }
  report_w.reset();
  pid_t child = -1;
  ASSERT_EQ(RetryEintr([&] { return ::read(report_r.get(), &child, sizeof child); }), static_cast<ssize_t>(sizeof child));
  ASSERT_EQ(::waitpid(parent, nullptr, 0), parent);
  // Reparented to init, which reaps it once it has ended.
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {
    Result<std::string> status = ReadFileToString("/proc/" + std::to_string(child) + "/status", 1 << 16);
    gone = !status.ok() || Field(*status, "State").rfind("Z", 0) == 0;
    if (!gone) ::usleep(20000);
  }
  EXPECT_TRUE(gone) << "helper " << child << " still waits for its go";
  if (!gone) ::kill(child, SIGKILL);
}

TEST(HelperSpawnTest, RefusesUidZeroInANamespaceOfItsOwn) {
  bool called = false;
  HelperUser user = MappedUser(&called);
  user.uid = 0;
  HelperSpec spec;
  spec.args = {"space"};
  spec.user = user;
  EXPECT_EQ(SpawnHelper(spec).status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(called);
}

}  // namespace
}  // namespace space
