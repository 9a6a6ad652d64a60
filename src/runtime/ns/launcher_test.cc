#include "runtime/ns/launcher.h"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "common/unique_fd.h"

namespace space::runtime::ns {
namespace {

// Two children cloned while both sync sockets are open: each copies the node's end of the
// other's socket. If the node dies before "go", each must still see EOF and exit. Before the
// child closed its copy of the node's fd table, they waited on each other for ever (and held
// the node's API listener, so a restarted node could not bind its port).
TEST(LauncherTest, ChildrenClonedTogetherExitWhenTheNodeGoesAwayBeforeGo) {
  int a[2], b[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, a), 0);
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, b), 0);
  UniqueFd a_parent(a[0]), a_child(a[1]), b_parent(b[0]), b_child(b[1]);

  ChildPlan plan_a, plan_b;
  plan_a.sync_fd = a_child.get();
  plan_b.sync_fd = b_child.get();
  Result<Spawned> child_a = CloneChild(plan_a);
  ASSERT_TRUE(child_a.ok()) << child_a.status().ToString();
  Result<Spawned> child_b = CloneChild(plan_b);
  if (!child_b.ok()) ::kill(child_a->pid, SIGKILL);
  ASSERT_TRUE(child_b.ok()) << child_b.status().ToString();

  // The "node" goes away: every fd of ours to the children closes.
  a_parent.reset();
  a_child.reset();
  b_parent.reset();
  b_child.reset();

  for (Spawned* c : {&*child_a, &*child_b}) {
    pollfd pfd{c->pidfd.get(), POLLIN, 0};
    int rc = ::poll(&pfd, 1, 10'000);
    if (rc != 1) {
      ::kill(child_a->pid, SIGKILL);
      ::kill(child_b->pid, SIGKILL);
    }
    EXPECT_EQ(rc, 1) << "child " << c->pid << " still waits for go";
    int status = 0;
    ASSERT_EQ(::waitpid(c->pid, &status, 0), c->pid);
    EXPECT_TRUE(WIFEXITED(status));
  }
}

}  // namespace
}  // namespace space::runtime::ns
