#include "guest/exec.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include "common/syscall.h"

namespace space::guest {
namespace {

TEST(ExecCandidatesTest, Table) {
  struct Case {
    std::string cmd, path;
    std::vector<std::string> want;
  };
  const Case cases[] = {
      {"ls", "/usr/bin:/bin", {"/usr/bin/ls", "/bin/ls"}},
      {"ls", "/usr/bin/:/bin", {"/usr/bin/ls", "/bin/ls"}},
      {"ls", "", {"./ls"}},
      {"ls", "/a::/b", {"/a/ls", "./ls", "/b/ls"}},
      {"ls", "/a:", {"/a/ls", "./ls"}},
      {"./x", "/usr/bin", {"./x"}},
      {"/bin/ls", "/usr/bin", {"/bin/ls"}},
      {"a/b", "/usr/bin", {"a/b"}},
  };
  for (const Case& c : cases) EXPECT_EQ(ExecCandidates(c.cmd, c.path), c.want) << c.cmd << " in " << c.path;
}

TEST(BuildEnvironmentTest, LayersInOrder) {
  UserEntry user{"user", 1000, 1000, "/home/user", "/bin/bash"};
  auto env = BuildEnvironment({"SANDBOX=1", "HOME=/root", "LANG=de_DE.UTF-8", "bogus", "=x"}, user,
                              {{"SANDBOX", "2"}, {"EXTRA", "a=b"}});
  EXPECT_EQ(env, (std::vector<std::string>{"EXTRA=a=b", "HOME=/home/user", "LANG=de_DE.UTF-8", "LOGNAME=user",
                                           "PATH=" + std::string(kDefaultPath), "SANDBOX=2", "SHELL=/bin/bash",
                                           "TERM=xterm", "USER=user"}));
}

// Spawns directly (no event loop) and collects stdout and the exit status.
std::pair<std::string, int> RunToCompletion(const ExecRequest& req) {
  ExecContext ctx;
  auto sp = SpawnProcess(req, ctx);
  EXPECT_TRUE(sp.ok()) << sp.status().ToString();
  if (!sp.ok()) return {"", -1};
  // The pipe is non-blocking; waiting for the exit first means all output is buffered.
  int status = 0;
  ::waitpid(sp->pid, &status, 0);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(sp->stdout_fd.get(), buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  return {out, status};
}

TEST(SpawnProcessTest, RunsInCwdWithEnv) {
  ExecRequest req;
  req.cmd = {"sh", "-c", "pwd; echo $FOO; cat"};  // cat: stdin must be at EOF already
  req.cwd = "/tmp";
  req.env = {{"FOO", "bar"}};
  auto [out, status] = RunToCompletion(req);
  EXPECT_EQ(out, "/tmp\nbar\n");
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST(SpawnProcessTest, ReportsSetupFailures) {
  struct Case {
    std::vector<std::string> cmd;
    std::optional<std::string> cwd;
    StatusCode code;
    std::string message_prefix;
  };
  const Case cases[] = {
      {{"/no/such/binary"}, std::nullopt, StatusCode::kNotFound, "exec /no/such/binary: ENOENT"},
      {{"no-such-command-xyz"}, std::nullopt, StatusCode::kNotFound, "exec no-such-command-xyz: ENOENT"},
      {{"/etc"}, std::nullopt, StatusCode::kPermissionDenied, "exec /etc: EACCES"},
      {{"true"}, "/no/such/dir", StatusCode::kNotFound, "chdir /no/such/dir: ENOENT"},
  };
  for (const Case& c : cases) {
    ExecRequest req;
    req.cmd = c.cmd;
    req.cwd = c.cwd;
    auto sp = SpawnProcess(req, ExecContext{});
    ASSERT_FALSE(sp.ok());
    EXPECT_EQ(sp.status().code(), c.code) << sp.status().ToString();
    EXPECT_EQ(sp.status().message().rfind(c.message_prefix, 0), 0u) << sp.status().message();
  }
}

}  // namespace
}  // namespace space::guest
