// The build jail runs a tool as root of a user namespace of its own over an idmapped tree:
// what it writes lands on disk under ids 0..65535, it can write nothing of the host, its
// mounts stay in its own namespace, and its failures come back with its last lines. This
// binary is also the jail's helper: SpawnHelper re-execs it as `build-jail` (main below).
#include "node/build_jail.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/host_slots.h"
#include "common/syscall.h"

namespace space::node {
namespace {

constexpr int64_t kSlot = 16100;

class BuildJailTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (id maps, idmapped mounts)";
    char tmpl[] = "/var/tmp/build-jail-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    tree_ = dir_ + "/tree";
    ASSERT_EQ(::mkdir(tree_.c_str(), 0755), 0);
    ASSERT_EQ(::chmod(dir_.c_str(), 0700), 0);  // like the pool: the jail cannot walk to the tree
    run_ = "/run/space-build-jail-test-" + std::to_string(::getpid());
    config_.acquire_slot = [this]() -> Result<int64_t> {
      ++acquired_;
      return kSlot;
    };
    config_.release_slot = [this](int64_t slot) { released_ += slot == kSlot; };
    config_.run_dir = run_;
  }
  void TearDown() override {
    if (!dir_.empty()) (void)std::system(("rm -rf " + dir_ + " " + run_).c_str());
  }

  // Runs `script` with /bin/sh in the jail (as debootstrap runs, unless `run` says otherwise);
  // its lines go to *lines.
  Status Run(const std::string& script, std::vector<std::string>* lines,
             storage::ToolRun run = {.network = true, .bind_devices = true}) {
    run.argv = [&](const std::string& target) { return std::vector<std::string>{"/bin/sh", "-c", script, "sh", target}; };
    return RunInBuildJail(config_, tree_, run, [lines](const std::string& l) { lines->push_back(l); });
  }

  static bool Has(const std::vector<std::string>& lines, const std::string& want) {
    for (const auto& l : lines) {
      if (l == want) return true;
    }
    return false;
  }

  std::string dir_, tree_, run_;
  BuildJailConfig config_;
  int acquired_ = 0, released_ = 0;
};

TEST_F(BuildJailTest, RunsAsRootOfItsOwnNamespaceOverTheIdmappedTree) {
  const std::string base = std::to_string(HostSlots::UidBase(kSlot));
  std::vector<std::string> lines;
  Status st = Run(
      "T=$1; echo uid=$(id -u) pid=$$; cat /proc/self/uid_map; "
      "touch $T/made && mkdir $T/owned && chown 42:43 $T/owned && echo wrote; "
      "touch /etc/build-jail-escape 2>/dev/null || echo host-refused; "
      "mkdir -p $T/proc && mount -t proc proc $T/proc && echo proc-mounted; "
      "[ -c $T/dev/null ] && echo devnull-bound; [ -f $T/dev/console ] && echo console-file; "
      "grep -c ' '$T' ' /proc/self/mountinfo",
      &lines);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_TRUE(Has(lines, "uid=0 pid=1")) << ::testing::PrintToString(lines);
  // Root inside, the leased slot's base outside, for exactly 65536 ids.
  bool mapped = false;
  for (const auto& l : lines) {
    std::vector<std::string> f;
    for (size_t at = 0; at < l.size();) {
      size_t end = l.find(' ', at);
      if (end == std::string::npos) end = l.size();
      if (end > at) f.push_back(l.substr(at, end - at));
      at = end + 1;
    }
    mapped |= f == std::vector<std::string>{"0", base, "65536"};
  }
  EXPECT_TRUE(mapped) << ::testing::PrintToString(lines);
  EXPECT_TRUE(Has(lines, "wrote")) << ::testing::PrintToString(lines);
  EXPECT_TRUE(Has(lines, "host-refused")) << ::testing::PrintToString(lines);
  EXPECT_TRUE(Has(lines, "proc-mounted")) << ::testing::PrintToString(lines);
  EXPECT_TRUE(Has(lines, "devnull-bound")) << ::testing::PrintToString(lines);
  EXPECT_TRUE(Has(lines, "console-file")) << ::testing::PrintToString(lines);
  EXPECT_NE(::access("/etc/build-jail-escape", F_OK), 0);
  // On disk, through no idmapping: what root of the jail made is owned by 0, the chown by 42:43.
  struct stat st_made, st_owned, st_console;
  ASSERT_EQ(::lstat((tree_ + "/made").c_str(), &st_made), 0);
  EXPECT_EQ(st_made.st_uid, 0u);
  EXPECT_EQ(st_made.st_gid, 0u);
  ASSERT_EQ(::lstat((tree_ + "/owned").c_str(), &st_owned), 0);
  EXPECT_EQ(st_owned.st_uid, 42u);
  EXPECT_EQ(st_owned.st_gid, 43u);
  ASSERT_EQ(::lstat((tree_ + "/dev/console").c_str(), &st_console), 0);
  EXPECT_TRUE(S_ISREG(st_console.st_mode));
  // The jail's mounts (the tree, proc, the device binds) ended with its namespace.
  Result<std::string> mountinfo = ReadFileToString("/proc/self/mountinfo", 4 << 20);
  ASSERT_TRUE(mountinfo.ok());
  EXPECT_EQ(mountinfo->find(run_), std::string::npos);
  EXPECT_EQ(mountinfo->find(tree_), std::string::npos);
  EXPECT_EQ(acquired_, 1);
  EXPECT_EQ(released_, 1);
}

TEST_F(BuildJailTest, FailureSaysTheExitStatusAndTheLastLines) {
  std::vector<std::string> lines;
  Status st = Run("echo one; echo boom >&2; exit 3", &lines);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("exit status 3"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("boom"), std::string::npos) << st.ToString();
  EXPECT_TRUE(Has(lines, "one"));
  EXPECT_EQ(released_, acquired_);
}

TEST_F(BuildJailTest, RefusesARelativeProgramAndGivesTheSlotBack) {
  Status st = RunInBuildJail(config_, tree_, {.argv = [](const std::string&) { return std::vector<std::string>{"sh"}; }},
                             nullptr);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_EQ(released_, acquired_);
}

TEST_F(BuildJailTest, RefusesATreeThatIsALink) {
  ASSERT_EQ(::symlink("/etc", (dir_ + "/link").c_str()), 0);
  Status st = RunInBuildJail(
      config_, dir_ + "/link", {.argv = [](const std::string& t) { return std::vector<std::string>{"/bin/true", t}; }},
      nullptr);
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(acquired_, 0);
}

// A step that does not ask for them gets no network (a namespace with only lo) and no device
// binds, and reads the stdin it is given (an import's tarball).
TEST_F(BuildJailTest, OtherStepsGetNoNetworkNoDevicesAndTheirStdin) {
  const std::string input = dir_ + "/input";
  ASSERT_TRUE(WriteFileAtomic(input, "from the node\n", 0600).ok());  // 0600 root: the jail could not open it
  Result<UniqueFd> in = OpenFd(input, O_RDONLY);
  ASSERT_TRUE(in.ok());
  std::vector<std::string> lines;
  Status st = Run("T=$1; echo links=$(grep -c : /proc/net/dev); [ -e $T/dev ] || echo no-dev; cat > $T/got; cat $T/got",
                  &lines, {.stdin_fd = in->get()});
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_TRUE(Has(lines, "links=1")) << ::testing::PrintToString(lines);  // lo only
  EXPECT_TRUE(Has(lines, "no-dev")) << ::testing::PrintToString(lines);
  EXPECT_TRUE(Has(lines, "from the node")) << ::testing::PrintToString(lines);
  EXPECT_EQ(released_, acquired_);
}

// "@busybox" runs the template builder's own step in the jail: the tree it lays out lands on
// disk owned by 0 and, for home/user, 1000, which the node no longer could chown itself.
TEST_F(BuildJailTest, RunsABuilderStep) {
  std::vector<std::string> lines;
  Status st = RunInBuildJail(
      config_, tree_, {.argv = [](const std::string& t) { return std::vector<std::string>{"@busybox", t}; }},
      [&](const std::string& l) { lines.push_back(l); });
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_TRUE(Has(lines, "busybox: done")) << ::testing::PrintToString(lines);
  struct stat bb, user;
  ASSERT_EQ(::lstat((tree_ + "/bin/busybox").c_str(), &bb), 0);
  EXPECT_EQ(bb.st_uid, 0u);
  EXPECT_EQ(bb.st_mode & 07777, 0755u);
  ASSERT_EQ(::lstat((tree_ + "/home/user").c_str(), &user), 0);
  EXPECT_EQ(user.st_uid, 1000u);
  EXPECT_EQ(user.st_gid, 1000u);
  lines.clear();
  st = RunInBuildJail(config_, tree_, {.argv = [](const std::string& t) { return std::vector<std::string>{"@nosuch", t}; }},
                      [&](const std::string& l) { lines.push_back(l); });
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("no tree step named @nosuch"), std::string::npos) << st.ToString();
  EXPECT_EQ(released_, acquired_);
}

}  // namespace
}  // namespace space::node

int main(int argc, char** argv) {
  // The helper ends with _exit, as `space build-jail` does: no exit-time handlers (an ASan
  // build's leak check cannot stop the world inside the jail's namespaces).
  if (argc >= 2 && std::strcmp(argv[1], "build-jail") == 0) {
    int code = space::node::BuildJailMain(argc, argv);
    std::fflush(nullptr);
    ::_exit(code);
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
