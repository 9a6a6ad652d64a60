#include "broker/broker.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "common/filtered_child_test_util.h"

#include "broker/broker_cgroup_acts.h"
#include "broker/broker_client.h"
#include "runtime/ns/cgroup.h"
#include "runtime/runtime.h"
#include "common/host_slots.h"
#include "storage/btrfs.h"
#include "storage/fs_util.h"
#include "storage/pool_mount.h"
#include "common/syscall.h"

namespace space::broker {
namespace {

// Net slot 98: network_test uses 99, and reconciles that prefix while it runs.
constexpr int64_t kTestNetSlot = 98;

class BrokerRootTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (namespaces, veths)";
  }
};

// A paused child. With `userns`, in a new user and network namespace whose uid_map maps root
// to the host range of `uid_slot`, as a sandbox's init is.
struct Child {
  pid_t pid = -1;
  UniqueFd pidfd;
  ~Child() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
};

// A broker forked from this process (its parent is the test, standing for the node) under
// its own seccomp filter, serving `config` on the other end of `client_end`.
struct FilteredBroker {
  pid_t pid = -1;
  UniqueFd client_end;
};

FilteredBroker ForkFilteredBroker(BrokerConfig config) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) return {};
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(sv[0]);
    if (!LoadBrokerSeccomp().ok()) ::_exit(1);
    Broker broker(std::move(config));
    ::_exit(Serve(sv[1], &broker) == 0 ? 0 : 2);
  }
  ::close(sv[1]);
  if (pid < 0) {
    ::close(sv[0]);
    return {};
  }
  return {pid, UniqueFd(sv[0])};
}

// A loop-backed btrfs pool of 1 GiB, mounted as the node mounts one, in a fresh directory
// `<prefix>.XXXXXX` (the data dir).
struct TestPool {
  std::string dir;
  storage::PoolMount mount;
};

Result<TestPool> MountTestPool(const std::string& prefix) {
  std::string dir = prefix + ".XXXXXX";
  if (::mkdtemp(dir.data()) == nullptr) return ErrnoStatus("mkdtemp", prefix, errno);
  storage::PoolConfig pc;
  pc.data_dir = dir;
  pc.loop_image_bytes = 1ull << 30;
  ASSIGN_OR_RETURN(storage::PoolMount mount, storage::MountPool(pc));
  return TestPool{dir, mount};
}

// Unmounts it (the loop device frees itself) and removes its directory.
void UnmountTestPool(const TestPool& p) {
  ASSERT_EQ(::umount2(p.mount.pool_dir.c_str(), MNT_DETACH), 0);
  ASSERT_EQ(std::system(("rm -rf " + p.dir).c_str()), 0);
}

// Once its client has closed the socket, the broker's loop ends and it exits 0.
void ExpectCleanExit(pid_t pid) {
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

void StartChild(Child* c, bool userns, int64_t uid_slot) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  c->pid = ::fork();
  ASSERT_GE(c->pid, 0);
  if (c->pid == 0) {
    if (userns && ::unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0) ::_exit(1);
    (void)!::write(ready[1], "x", 1);
    ::pause();
    ::_exit(0);
  }
  char ch;
  ASSERT_EQ(::read(ready[0], &ch, 1), 1);
  ::close(ready[0]);
  ::close(ready[1]);
  if (userns) {
    std::string map = "0 " + std::to_string(HostSlots::UidBase(uid_slot)) + " 65536\n";
    ASSERT_TRUE(WriteSmallFile("/proc/" + std::to_string(c->pid) + "/uid_map", map).ok());
  }
  c->pidfd = UniqueFd(static_cast<int>(::syscall(SYS_pidfd_open, c->pid, 0)));
  ASSERT_TRUE(c->pidfd.valid());
}

bool LinkExists(const std::string& name) {
  return std::system(("ip link show " + name + " >/dev/null 2>&1").c_str()) == 0;
}

TEST_F(BrokerRootTest, OpensOnlyTheNamespaceOfTheNamedSlotsSandbox) {
  Child sandbox;
  StartChild(&sandbox, true, 4243);
  auto ns = OpenSandboxNetns(sandbox.pidfd.get(), 4243);
  ASSERT_TRUE(ns.ok()) << ns.status().ToString();

  // Another slot's sandbox, a host process, a descriptor that is no pidfd, a dead process.
  EXPECT_EQ(OpenSandboxNetns(sandbox.pidfd.get(), 4244).status().code(), StatusCode::kPermissionDenied);
  Child host;
  StartChild(&host, false, 0);
  EXPECT_EQ(OpenSandboxNetns(host.pidfd.get(), 0).status().code(), StatusCode::kPermissionDenied);
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  EXPECT_EQ(OpenSandboxNetns(p[0], 4243).status().code(), StatusCode::kInvalidArgument);
  ::close(p[0]);
  ::close(p[1]);
  ::kill(sandbox.pid, SIGKILL);
  ::waitpid(sandbox.pid, nullptr, 0);
  sandbox.pid = -1;
  EXPECT_FALSE(OpenSandboxNetns(sandbox.pidfd.get(), 4243).ok());
}

TEST_F(BrokerRootTest, ServesTheNodeOverItsSocket) {
  char tmpl[] = "/tmp/broker_test.XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  HostSlots others(tmpl);  // every slot below the test's is someone else's
  for (int64_t s = 0; s < kTestNetSlot; ++s) ASSERT_TRUE(others.Acquire(s).ok());

  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
  const std::string uid_dir = std::string(tmpl) + "/uid-slots";
  Broker broker(BrokerConfig{.net_lock_dir = tmpl, .uid_lock_dir = uid_dir});
  int served = -1;
  std::thread server([&] { served = Serve(sv[1], &broker); });
  {
    BrokerClient client{UniqueFd(sv[0])};
    Child sandbox;
    StartChild(&sandbox, true, 4243);
    EXPECT_EQ(client.NetAttach(4243, sandbox.pid).status().code(), StatusCode::kConflict);  // no slot yet

    auto slot = client.NetAcquire();
    ASSERT_TRUE(slot.ok()) << slot.status().ToString();
    EXPECT_EQ(*slot, kTestNetSlot);
    EXPECT_EQ(*client.NetAcquire(), kTestNetSlot);  // the same slot again

    // Only a uid slot the broker leased to this node.
    EXPECT_EQ(client.NetAttach(4243, sandbox.pid).status().code(), StatusCode::kPermissionDenied);
    auto leased = client.UidAcquire(4243);
    ASSERT_TRUE(leased.ok()) << leased.status().ToString();
    EXPECT_EQ(*leased, 4243);

    EXPECT_EQ(client.NetAttach(4244, sandbox.pid).status().code(), StatusCode::kPermissionDenied);
    EXPECT_FALSE(LinkExists("sp98-4244"));
    auto address = client.NetAttach(4243, sandbox.pid);
    ASSERT_TRUE(address.ok()) << address.status().ToString();
    EXPECT_TRUE(LinkExists("sp98-4243"));
    EXPECT_TRUE(client.NetReconcile({4243}).ok());
    EXPECT_TRUE(LinkExists("sp98-4243"));
    EXPECT_TRUE(client.NetDetach(4243).ok());
    EXPECT_FALSE(LinkExists("sp98-4243"));

    // A vm sandbox's tap: only for a leased slot, the same link name and address, and the
    // link lives exactly as long as its descriptor.
    UniqueFd tap;
    EXPECT_EQ(client.NetTap(4244, &tap).status().code(), StatusCode::kPermissionDenied);
    EXPECT_FALSE(LinkExists("sp98-4244"));
    auto tap_address = client.NetTap(4243, &tap);
    ASSERT_TRUE(tap_address.ok()) << tap_address.status().ToString();
    EXPECT_EQ(tap_address->s_addr, address->s_addr);
    EXPECT_TRUE(tap.valid());
    EXPECT_TRUE(LinkExists("sp98-4243"));
    tap.reset();
    EXPECT_FALSE(LinkExists("sp98-4243"));
    ASSERT_TRUE(client.NetTap(4243, &tap).ok());
    EXPECT_TRUE(client.NetDetach(4243).ok());  // removed while its descriptor is open
    EXPECT_FALSE(LinkExists("sp98-4243"));
    tap.reset();
    EXPECT_TRUE(client.UidRelease(4243).ok());
    EXPECT_EQ(client.UidRelease(4243).code(), StatusCode::kNotFound);

    UniqueFd a, b;
    ASSERT_TRUE(client.SeqpacketPair(2 << 20, &a, &b).ok());
    int size = 0;
    socklen_t len = sizeof size;
    ASSERT_EQ(::getsockopt(a.get(), SOL_SOCKET, SO_SNDBUF, &size, &len), 0);
    EXPECT_GE(size, 2 << 20);  // above a default wmem_max: forced
    ASSERT_EQ(::send(a.get(), "ping", 4, 0), 4);
    char buf[8];
    EXPECT_EQ(::recv(b.get(), buf, sizeof buf, 0), 4);
  }  // the client closes its end: the broker's loop ends
  server.join();
  EXPECT_EQ(served, 0);
  ::close(sv[1]);
  ASSERT_EQ(std::system((std::string("rm -rf ") + tmpl).c_str()), 0);
}

// The broker's filter in a child, as root, so each refused call would succeed unfiltered.
int InFilteredChild(const std::function<int()>& body) {
  return testing::InRestrictedChild(LoadBrokerSeccomp, body);
}

TEST_F(BrokerRootTest, SeccompRefusesWaysOutAndKeepsWhatTheBrokerUses) {
  Child other;  // a process to signal: made and ended by the unfiltered test
  StartChild(&other, false, 0);
  const pid_t target = other.pid;
  const int target_pidfd = other.pidfd.get();
  int own_netns = ::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  int own_uts = ::open("/proc/self/ns/uts", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(own_netns, 0);
  ASSERT_GE(own_uts, 0);
  int code = InFilteredChild([&] {
    auto refused = [](long r) { return r == -1 && errno == EPERM; };
    if (!refused(::unshare(CLONE_NEWNET))) return 1;
    if (!refused(::mount("none", "/mnt", "tmpfs", 0, nullptr))) return 2;
    char* argv[] = {const_cast<char*>("/bin/true"), nullptr};
    if (!refused(::execve("/bin/true", argv, nullptr))) return 3;
    if (!refused(::setns(own_uts, CLONE_NEWUTS))) return 4;
    if (!refused(::kill(target, SIGCONT))) return 5;
    if (!refused(::syscall(SYS_pidfd_send_signal, target_pidfd, SIGCONT, nullptr, 0))) return 6;
    if (!refused(::syscall(SYS_tgkill, target, target, SIGCONT))) return 10;
    if (!refused(::setresuid(1, 1, 1))) return 7;
    if (!refused(::syscall(SYS_bpf, 0, nullptr, 0))) return 8;
    if (::socket(AF_PACKET, SOCK_RAW, 0) != -1 || errno != EAFNOSUPPORT) return 9;
    // pidfd_send_signal only with SIGKILL: liveness is polled (a probe with 0 is refused).
    if (!refused(::syscall(SYS_pidfd_send_signal, target_pidfd, 0, nullptr, 0))) return 11;
    // open_tree only as one detached, non-recursive clone (idmap_tree); nothing ever attached.
    if (!refused(::syscall(SYS_open_tree, AT_FDCWD, "/", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE))) return 12;
    if (!refused(::syscall(SYS_open_tree, AT_FDCWD, "/", OPEN_TREE_CLOEXEC))) return 13;
    if (!refused(::syscall(SYS_move_mount, AT_FDCWD, "/tmp", AT_FDCWD, "/mnt", 0))) return 14;
    int tmp = ::open("/tmp", O_PATH | O_CLOEXEC);
    long clone = ::syscall(SYS_open_tree, tmp, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
    if (clone < 0) return 26;
    ::close(static_cast<int>(clone));
    ::close(tmp);
    // What the broker does: netlink, setns into a network namespace, pidfd polls, threads.
    int nl = ::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, 0);
    if (nl < 0) return 20;
    ::close(nl);
    if (::setns(own_netns, CLONE_NEWNET) != 0) return 21;
    pollfd p{target_pidfd, POLLIN, 0};
    if (::poll(&p, 1, 0) != 0) return 22;
    int ran = 0;
    std::thread([&] { ran = 1; }).join();
    if (!ran) return 23;
    // SIGKILL to another process: a v1 cgroup's tasks (cgroup_kill), a node's child (kill_child).
    if (::syscall(SYS_pidfd_send_signal, target_pidfd, SIGKILL, nullptr, 0) != 0) return 25;
    return ::kill(target, SIGKILL) == 0 ? 0 : 24;
  });
  EXPECT_EQ(code, 0);
  ::close(own_netns);
  ::close(own_uts);
}

// A name no node uses (node names hash a data dir), so the real cgroupfs can be used.
constexpr char kTestCgroupName[] = "space-00000000b70c3e57";

TEST_F(BrokerRootTest, AttachesOnlyChildrenOfItsParent) {
  // The broker is a child of the node: its parent's other children are sandboxes and VMMs.
  // Here the test plays the node, a forked child the broker, another child the sandbox.
  Child sandbox;
  StartChild(&sandbox, false, 0);
  const int sandbox_pidfd = sandbox.pidfd.get();
  const pid_t node = ::getpid();
  pid_t broker = ::fork();
  ASSERT_GE(broker, 0);
  if (broker == 0) {
    auto own = NodeChildOfPidfd(sandbox_pidfd);
    if (!own.ok() || *own != sandbox.pid) ::_exit(1);
    UniqueFd init(static_cast<int>(::syscall(SYS_pidfd_open, 1, 0)));
    if (NodeChildOfPidfd(init.get()).status().code() != StatusCode::kPermissionDenied) ::_exit(2);
    UniqueFd parent(static_cast<int>(::syscall(SYS_pidfd_open, node, 0)));
    if (NodeChildOfPidfd(parent.get()).status().code() != StatusCode::kPermissionDenied) ::_exit(3);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(broker, &status, 0), broker);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  EXPECT_EQ(NodeChildOfPidfd(p[0]).status().code(), StatusCode::kInvalidArgument);
  ::close(p[0]);
  ::close(p[1]);
}

// kill_child end to end: the test plays the node, a forked child the broker (serving the
// node's socket under its own seccomp filter), other children the sandbox and a stranger.
TEST_F(BrokerRootTest, KillsOnlyChildrenOfTheNodeOverItsSocket) {
  Child sandbox, exited;
  StartChild(&sandbox, false, 0);
  StartChild(&exited, false, 0);
  ::kill(exited.pid, SIGKILL);
  ::waitpid(exited.pid, nullptr, 0);
  exited.pid = -1;
  FilteredBroker broker = ForkFilteredBroker(BrokerConfig{"/nonexistent"});
  ASSERT_GT(broker.pid, 0);
  {
    BrokerClient client{std::move(broker.client_end)};
    // Not children of the node: pid 1, and the node itself (the broker's parent).
    UniqueFd init(static_cast<int>(::syscall(SYS_pidfd_open, 1, 0)));
    EXPECT_EQ(client.KillChild(init.get()).code(), StatusCode::kPermissionDenied);
    UniqueFd self(static_cast<int>(::syscall(SYS_pidfd_open, ::getpid(), 0)));
    EXPECT_EQ(client.KillChild(self.get()).code(), StatusCode::kPermissionDenied);
    int p[2];
    ASSERT_EQ(::pipe(p), 0);
    EXPECT_EQ(client.KillChild(p[0]).code(), StatusCode::kInvalidArgument);
    ::close(p[0]);
    ::close(p[1]);
    EXPECT_EQ(client.KillChild(exited.pidfd.get()).code(), StatusCode::kNotFound);
    ASSERT_TRUE(client.KillChild(sandbox.pidfd.get()).ok());
    int status = 0;
    ASSERT_EQ(::waitpid(sandbox.pid, &status, 0), sandbox.pid);
    sandbox.pid = -1;
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  }  // the client closes its end: the broker's loop ends
  ExpectCleanExit(broker.pid);
}

// child_nice and node_thread_nice, the broker under its own seccomp filter: a nice value of 0..19
// for a child of the node or a thread of the node, nothing else.
TEST_F(BrokerRootTest, SetsNiceOnlyOfTheNodesChildrenAndThreadsOverItsSocket) {
  Child sandbox;
  StartChild(&sandbox, false, 0);
  std::atomic<pid_t> tid{0};
  std::atomic<bool> done{false};
  std::thread worker([&] {
    (void)::setpriority(PRIO_PROCESS, 0, 10);
    tid = ::gettid();
    while (!done) ::usleep(1000);
  });
  while (tid == 0) ::usleep(1000);
  FilteredBroker broker = ForkFilteredBroker(BrokerConfig{"/nonexistent"});
  ASSERT_GT(broker.pid, 0);
  {
    BrokerClient client{std::move(broker.client_end)};
    ASSERT_TRUE(client.SetChildNice(sandbox.pidfd.get(), 7).ok());
    EXPECT_EQ(::getpriority(PRIO_PROCESS, static_cast<id_t>(sandbox.pid)), 7);
    ASSERT_EQ(::getpriority(PRIO_PROCESS, static_cast<id_t>(tid.load())), 10);
    Status st = client.SetThreadNice(tid, 0);
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(::getpriority(PRIO_PROCESS, static_cast<id_t>(tid.load())), 0);
    // Not the node's: pid 1, the node itself as a child, a child's pid as a thread.
    UniqueFd init(static_cast<int>(::syscall(SYS_pidfd_open, 1, 0)));
    EXPECT_EQ(client.SetChildNice(init.get(), 0).code(), StatusCode::kPermissionDenied);
    UniqueFd self(static_cast<int>(::syscall(SYS_pidfd_open, ::getpid(), 0)));
    EXPECT_EQ(client.SetChildNice(self.get(), 0).code(), StatusCode::kPermissionDenied);
    EXPECT_EQ(client.SetThreadNice(1, 0).code(), StatusCode::kPermissionDenied);
    EXPECT_EQ(client.SetThreadNice(sandbox.pid, 0).code(), StatusCode::kPermissionDenied);
    // Never above normal priority (the broker decodes -5 and refuses it).
    EXPECT_EQ(client.SetThreadNice(tid, -5).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(::getpriority(PRIO_PROCESS, static_cast<id_t>(tid.load())), 0);
  }
  done = true;
  worker.join();
  ExpectCleanExit(broker.pid);
}

// A paused child in a user namespace whose maps nobody has written. With `nested`, in a
// second one made inside the first (once the test has mapped the first).
void StartUnmappedChild(Child* c, bool nested = false) {
  int ready[2], go[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(go), 0);
  c->pid = ::fork();
  ASSERT_GE(c->pid, 0);
  if (c->pid == 0) {
    if (::unshare(CLONE_NEWUSER) != 0) ::_exit(1);
    (void)!::write(ready[1], "x", 1);
    char ch;
    // Mapped by then, it becomes an id the map has: only a mapped process may nest.
    if (nested && (::read(go[0], &ch, 1) != 1 || ::syscall(SYS_setresgid, 0, 0, 0) != 0 ||
                   ::syscall(SYS_setresuid, 0, 0, 0) != 0 || ::unshare(CLONE_NEWUSER) != 0)) {
      ::_exit(2);
    }
    if (nested) (void)!::write(ready[1], "x", 1);
    ::pause();
    ::_exit(0);
  }
  ::close(ready[1]);  // a child that fails reads as EOF, not a wait for ever
  ::close(go[0]);
  char ch;
  ASSERT_EQ(::read(ready[0], &ch, 1), 1);
  if (nested) {
    const std::string map = "0 " + std::to_string(HostSlots::UidBase(4250)) + " 65536\n";
    ASSERT_TRUE(WriteSmallFile("/proc/" + std::to_string(c->pid) + "/uid_map", map).ok());
    ASSERT_TRUE(WriteSmallFile("/proc/" + std::to_string(c->pid) + "/gid_map", map).ok());
    ASSERT_EQ(::write(go[1], "g", 1), 1);
    ASSERT_EQ(::read(ready[0], &ch, 1), 1);
  }
  for (int fd : {ready[0], go[1]}) ::close(fd);
  c->pidfd = UniqueFd(static_cast<int>(::syscall(SYS_pidfd_open, c->pid, 0)));
  ASSERT_TRUE(c->pidfd.valid());
}

// A map line as /proc shows it.
std::string MapLine(uint32_t inside, uint32_t outside, uint32_t count) {
  char line[64];
  std::snprintf(line, sizeof line, "%10u %10u %10u\n", inside, outside, count);
  return line;
}

std::string MapOf(const Child& c, const char* which) {
  auto text = ReadFileToString("/proc/" + std::to_string(c.pid) + "/" + which, 4096);
  return text.ok() ? *text : "<" + text.status().ToString() + ">";
}

// userns_map end to end, the broker under its own seccomp filter: only a child of the node,
// only in a fresh user namespace right under the host's, only once, only slot ranges.
TEST_F(BrokerRootTest, MapsOnlyFreshUserNamespacesOfTheNodesChildrenOverItsSocket) {
  Child sandbox, vmm, host, nested, exited;
  StartUnmappedChild(&sandbox);
  StartUnmappedChild(&vmm);
  StartUnmappedChild(&nested, true);
  StartUnmappedChild(&exited);
  StartChild(&host, false, 0);
  ::kill(exited.pid, SIGKILL);
  ::waitpid(exited.pid, nullptr, 0);
  exited.pid = -1;
  char tmpl[] = "/tmp/broker_test.XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string uid_dir = std::string(tmpl) + "/uid-slots";
  FilteredBroker broker = ForkFilteredBroker(BrokerConfig{.net_lock_dir = "/nonexistent", .uid_lock_dir = uid_dir});
  ASSERT_GT(broker.pid, 0);
  using runtime::ns::IdMapShape;
  const uint32_t base = HostSlots::UidBase(4251);
  {
    BrokerClient client{std::move(broker.client_end)};
    auto map = [&](const Child& c, IdMapShape shape, gid_t kvm_gid = 0, uint32_t uid_base = 0) {
      return client.MapUserns({.pidfd = c.pidfd.get(), .pid = c.pid, .uid_base = uid_base ? uid_base : base,
                               .shape = shape, .kvm_gid = kvm_gid});
    };
    // A slot the broker has not leased to this node: refused, nothing written.
    EXPECT_EQ(map(sandbox, IdMapShape::kSandbox).code(), StatusCode::kPermissionDenied);
    EXPECT_EQ(MapOf(sandbox, "uid_map"), "");
    ASSERT_TRUE(client.UidAcquire(4251).ok());
    ASSERT_TRUE(client.UidAcquire(4252).ok());
    Status mapped = map(sandbox, IdMapShape::kSandbox);
    ASSERT_TRUE(mapped.ok()) << mapped.ToString();
    EXPECT_EQ(MapOf(sandbox, "uid_map"), MapLine(0, base, 65536));
    EXPECT_EQ(MapOf(sandbox, "gid_map"), MapLine(0, base, 65536));
    // Once only: a mapped namespace is never remapped (to another slot, or as a VMM).
    EXPECT_FALSE(map(sandbox, IdMapShape::kSandbox, 0, HostSlots::UidBase(4252)).ok());
    EXPECT_FALSE(map(sandbox, IdMapShape::kOneId).ok());
    EXPECT_EQ(MapOf(sandbox, "uid_map"), MapLine(0, base, 65536));

    // A gid that is not /dev/kvm's group (on a host without one, any): refused, nothing written.
    EXPECT_EQ(map(vmm, IdMapShape::kOneId, 4242).code(), StatusCode::kPermissionDenied);
    EXPECT_EQ(MapOf(vmm, "uid_map"), "");
    mapped = map(vmm, IdMapShape::kOneId);
    ASSERT_TRUE(mapped.ok()) << mapped.ToString();
    EXPECT_EQ(MapOf(vmm, "uid_map"), MapLine(base, base, 1));
    EXPECT_EQ(MapOf(vmm, "gid_map"), MapLine(base, base, 1));

    EXPECT_EQ(map(host, IdMapShape::kSandbox).code(), StatusCode::kPermissionDenied);
    EXPECT_EQ(map(nested, IdMapShape::kSandbox).code(), StatusCode::kPermissionDenied);
    EXPECT_EQ(MapOf(nested, "uid_map"), "");
    EXPECT_EQ(map(exited, IdMapShape::kSandbox).code(), StatusCode::kNotFound);
    // The node itself and pid 1 are no children of the node.
    Child self;
    self.pidfd = UniqueFd(static_cast<int>(::syscall(SYS_pidfd_open, ::getpid(), 0)));
    self.pid = -1;
    EXPECT_EQ(map(self, IdMapShape::kSandbox).code(), StatusCode::kPermissionDenied);
    // Uid bases that start no slot never leave the client.
    EXPECT_EQ(map(vmm, IdMapShape::kOneId, 0, base + 1).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(map(vmm, IdMapShape::kOneId, 0, 65536).code(), StatusCode::kInvalidArgument);
  }
  ExpectCleanExit(broker.pid);
  ASSERT_EQ(std::system((std::string("rm -rf ") + tmpl).c_str()), 0);
}

TEST(IdmapPathTest, OnlySandboxRootsAndTemplateBuildsOfThePool) {
  const std::string pool = "/var/lib/space/pool";
  EXPECT_TRUE(IsIdmappablePoolPath(pool, pool + "/sandboxes/sbx_A-1"));
  EXPECT_TRUE(IsIdmappablePoolPath(pool, pool + "/templates/tmp-0123456789abcdef"));
  EXPECT_TRUE(IsIdmappablePoolPath(pool, pool + "/snapshots/tmp-snap_0123456789abcdefghijkl"));
  EXPECT_FALSE(IsIdmappablePoolPath(pool, pool + "/snapshots/tmp-"));
  EXPECT_FALSE(IsIdmappablePoolPath(pool, pool + "/snapshots/tmp-snap_1/etc"));
  for (const std::string& bad : std::vector<std::string>{pool, pool + "/", pool + "/sandboxes", pool + "/sandboxes/", pool + "/sandboxes/..",
                                pool + "/sandboxes/.sbx_1.new", pool + "/sandboxes/sbx_1/upper", pool + "/sandboxes/sbx_1/merged",
                                pool + "/sandboxes/sbx_1/merged/etc", pool + "/snapshots/snap_1",
                                pool + "/templates/sha256-00", pool + "/templates/tmp-0123456789abcde",
                                pool + "/templates/tmp-0123456789abcdef0", pool + "/templates/tmp-0123456789ABCDEF",
                                pool + "x/sandboxes/sbx_1", "/etc", "/var/lib/space/sandboxes/sbx_1",
                                pool + "/sandboxes/sbx_1 (deleted)"}) {
    EXPECT_FALSE(IsIdmappablePoolPath(pool, bad)) << bad;
  }
  EXPECT_FALSE(IsIdmappablePoolPath("", "/sandboxes/sbx_1"));
  // Read-only clones may also be of a snapshot, and of nothing else more.
  EXPECT_TRUE(IsReadOnlyIdmappablePoolPath(pool, pool + "/snapshots/snap_A-1"));
  EXPECT_TRUE(IsReadOnlyIdmappablePoolPath(pool, pool + "/sandboxes/sbx_1"));
  for (const std::string& bad : std::vector<std::string>{pool + "/snapshots", pool + "/snapshots/", pool + "/snapshots/..",
                                pool + "/snapshots/snap_1/etc", pool + "/snapshots/.snap", pool + "/templates/sha256-00",
                                "/var/lib/space/snapshots/snap_1", pool + "x/snapshots/snap_1"}) {
    EXPECT_FALSE(IsReadOnlyIdmappablePoolPath(pool, bad)) << bad;
  }
  EXPECT_FALSE(IsIdmappablePoolPath("/", "//sandboxes/sbx_1"));
  // Volumes and their views, by one component's name.
  EXPECT_TRUE(IsIdmappablePoolPath(pool, pool + "/volumes/vol_1"));
  EXPECT_TRUE(IsIdmappablePoolPath(pool, pool + "/volumes/vol_1.ro-sbx_2"));
  for (const std::string& bad :
       std::vector<std::string>{pool + "/volumes", pool + "/volumes/", pool + "/volumes/..", pool + "/volumes/.",
                                pool + "/volumes/vol_1/etc", pool + "x/volumes/vol_1"}) {
    EXPECT_FALSE(IsIdmappablePoolPath(pool, bad)) << bad;
  }
  EXPECT_TRUE(IsPoolLimitable(pool, pool + "/volumes/vol_1"));
  EXPECT_TRUE(IsPoolLimitable(pool, pool + "/sandboxes/sbx_1"));
  EXPECT_FALSE(IsPoolLimitable(pool, pool + "/volumes/vol_1/x"));
  EXPECT_FALSE(IsPoolLimitable(pool, pool + "/templates/sha256-00"));
}

// idmap_tree end to end, the broker under its own seccomp filter: a detached idmapped clone
// of a sandbox root or template build of its pool, for a sandbox-shaped namespace of a leased
// slot only; never another directory, another shape, another slot or a process not the node's.
TEST_F(BrokerRootTest, IdmapsOnlyItsPoolsTreesForItsSlotsSandboxes) {
  Result<TestPool> tp = MountTestPool("/var/tmp/broker_idmap");
  ASSERT_TRUE(tp.ok()) << tp.status().ToString();
  const char* tmpl = tp->dir.c_str();
  const storage::PoolMount* m = &tp->mount;
  const std::string pool = m->pool_dir;
  ASSERT_TRUE(storage::CreateSubvolume(nullptr, pool + "/sandboxes/sbx_1").ok());
  ASSERT_TRUE(storage::CreateSubvolume(nullptr, pool + "/templates/tmp-0123456789abcdef").ok());
  ASSERT_TRUE(storage::CreateSnapshot(nullptr, pool + "/sandboxes/sbx_1", pool + "/snapshots/snap_1", /*read_only=*/false).ok());
  // A plain directory where a sandbox root belongs: a hard link from elsewhere on the same
  // filesystem could sit in it, so it is refused whatever its name.
  ASSERT_EQ(::mkdir((pool + "/sandboxes/sbx_plain").c_str(), 0700), 0);
  ASSERT_EQ(::symlink((pool + "/snapshots/snap_1").c_str(), (pool + "/sandboxes/sbx_link").c_str()), 0);
  const std::string uid_dir = std::string(tmpl) + "/uid-slots";
  Child sandbox, vmm, unleased, host;
  StartUnmappedChild(&sandbox);
  StartUnmappedChild(&vmm);
  StartUnmappedChild(&unleased);
  StartChild(&host, false, 0);
  FilteredBroker broker = ForkFilteredBroker(BrokerConfig{.net_lock_dir = "/nonexistent", .uid_lock_dir = uid_dir, .pool_dir = pool});
  ASSERT_GT(broker.pid, 0);
  using runtime::ns::IdMapShape;
  const uint32_t base = HostSlots::UidBase(4261), other = HostSlots::UidBase(4262);
  {
    BrokerClient client{std::move(broker.client_end)};
    ASSERT_TRUE(client.UidAcquire(4261).ok());
    ASSERT_TRUE(client.MapUserns({.pidfd = sandbox.pidfd.get(), .pid = sandbox.pid, .uid_base = base}).ok());
    ASSERT_TRUE(client.MapUserns({.pidfd = vmm.pidfd.get(), .pid = vmm.pid, .uid_base = base,
                                  .shape = IdMapShape::kOneId}).ok());
    const std::string unleased_map = "0 " + std::to_string(other) + " 65536\n";
    ASSERT_TRUE(WriteSmallFile("/proc/" + std::to_string(unleased.pid) + "/uid_map", unleased_map).ok());
    auto idmap = [&](const std::string& dir, const Child& c, uint32_t uid_base, bool read_only = false) -> Result<UniqueFd> {
      ASSIGN_OR_RETURN(UniqueFd d, OpenFd(dir, O_PATH | O_DIRECTORY | O_CLOEXEC));
      return client.IdmapTree(d.get(), c.pidfd.get(), uid_base, read_only);
    };
    // A snapshot only read-only (the tree jail's reads), and then nothing writes through it.
    for (const std::string& ro : std::vector<std::string>{pool + "/snapshots/snap_1", pool + "/sandboxes/sbx_1"}) {
      Result<UniqueFd> clone = idmap(ro, sandbox, base, /*read_only=*/true);
      ASSERT_TRUE(clone.ok()) << ro << ": " << clone.status().ToString();
      errno = 0;
      EXPECT_LT(::openat(clone->get(), "written", O_WRONLY | O_CREAT | O_CLOEXEC, 0600), 0) << ro;
      EXPECT_EQ(errno, EROFS) << ro;
    }
    for (const std::string& bad : std::vector<std::string>{pool + "/snapshots", pool + "/snapshots/../sandboxes", pool,
                                  pool + "/sandboxes/sbx_plain", std::string("/etc")}) {
      EXPECT_EQ(idmap(bad, sandbox, base, true).status().code(), StatusCode::kPermissionDenied) << bad;
    }
    for (const std::string& ok : std::vector<std::string>{pool + "/sandboxes/sbx_1", pool + "/templates/tmp-0123456789abcdef"}) {
      Result<UniqueFd> clone = idmap(ok, sandbox, base);
      ASSERT_TRUE(clone.ok()) << ok << ": " << clone.status().ToString();
      // Through the clone, on-disk root is the slot's base: the namespace's root.
      struct stat st;
      ASSERT_EQ(::fstat(clone->get(), &st), 0);
      EXPECT_EQ(st.st_uid, base) << ok;
    }
    for (const std::string& bad : std::vector<std::string>{pool + "/snapshots/snap_1", pool, pool + "/sandboxes", std::string("/etc"),
                                  pool + "/sandboxes/sbx_link", pool + "/sandboxes/sbx_plain", std::string(tmpl)}) {
      EXPECT_EQ(idmap(bad, sandbox, base).status().code(), StatusCode::kPermissionDenied) << bad;
    }
    // Not a sandbox-shaped namespace of that slot (the VMM's one-id map), a slot not leased
    // to the node, a process in the host's user namespace.
    EXPECT_EQ(idmap(pool + "/sandboxes/sbx_1", vmm, base).status().code(), StatusCode::kPermissionDenied);
    EXPECT_EQ(idmap(pool + "/sandboxes/sbx_1", unleased, other).status().code(), StatusCode::kPermissionDenied);
    EXPECT_EQ(idmap(pool + "/sandboxes/sbx_1", host, base).status().code(), StatusCode::kPermissionDenied);
  }
  ExpectCleanExit(broker.pid);
  UnmountTestPool(*tp);
}

// subvol_delete, qgroup_limit and quota_rescan end to end, the broker under its own seccomp
// filter, on a real loop-backed btrfs pool: only the pool's own subvolume directories and
// sandbox roots, whatever path the node names.
TEST_F(BrokerRootTest, ActsOnlyOnItsPoolsSubvolumesOverItsSocket) {
  Result<TestPool> tp = MountTestPool("/var/tmp/broker_pool");
  ASSERT_TRUE(tp.ok()) << tp.status().ToString();
  const storage::PoolMount* m = &tp->mount;
  ASSERT_TRUE(m->btrfs && m->quota_enabled);
  const std::string pool = m->pool_dir;
  const std::string root = pool + "/sandboxes/sbx_1", snap = pool + "/snapshots/snap_1", other = pool + "/other";
  ASSERT_TRUE(storage::CreateSubvolume(nullptr, root).ok());
  ASSERT_TRUE(storage::CreateSnapshot(nullptr, root, snap, /*read_only=*/true).ok());
  ASSERT_TRUE(storage::CreateSubvolume(nullptr, other).ok());
  ASSERT_EQ(::symlink(pool.c_str(), (pool + "/sandboxes/link").c_str()), 0);
  FilteredBroker broker = ForkFilteredBroker(BrokerConfig{.net_lock_dir = "/nonexistent", .pool_dir = pool});
  ASSERT_GT(broker.pid, 0);
  {
    BrokerClient client{std::move(broker.client_end)};
    // A sandbox root's limit, as the kernel then shows it.
    ASSERT_TRUE(client.SetExclusiveLimit(root, 64 << 20).ok());
    Result<uint64_t> id = storage::SubvolumeId(root);
    Result<std::string> qgroups = storage::QuotaSysfsDir(pool);
    ASSERT_TRUE(id.ok() && qgroups.ok());
    Result<std::string> max = ReadFileToString(*qgroups + "/0_" + std::to_string(*id) + "/max_exclusive", 64);
    ASSERT_TRUE(max.ok()) << max.status().ToString();
    EXPECT_EQ(std::stoull(*max), 64ull << 20);
    for (const std::string& bad : std::vector<std::string>{snap, other, pool, pool + "/sandboxes"}) {
      EXPECT_EQ(client.SetExclusiveLimit(bad, 1 << 20).code(), StatusCode::kPermissionDenied) << bad;
    }
    EXPECT_EQ(client.SetExclusiveLimit(root, 0).code(), StatusCode::kInvalidArgument);
    // Deletes only in sandboxes/, snapshots/ and templates/: not the pool's own top, not by a
    // parent that ".." or a link leads elsewhere.
    EXPECT_EQ(client.DeleteSubvolume(other).code(), StatusCode::kPermissionDenied);
    EXPECT_EQ(client.DeleteSubvolume(pool + "/sandboxes/../other").code(), StatusCode::kPermissionDenied);
    EXPECT_FALSE(client.DeleteSubvolume(pool + "/sandboxes/link/other").ok());
    EXPECT_TRUE(storage::IsSubvolume(other));
    Status del = client.DeleteSubvolume(snap);  // a read-only snapshot
    EXPECT_TRUE(del.ok()) << del.ToString();
    EXPECT_FALSE(storage::PathExists(snap));
    del = client.DeleteSubvolume(root);
    EXPECT_TRUE(del.ok()) << del.ToString();
    EXPECT_FALSE(storage::PathExists(root));
    EXPECT_TRUE(client.DeleteSubvolume(root).ok());  // gone already: nothing to do
    Result<bool> rescan = client.RescanQuotaIfInconsistent();
    EXPECT_TRUE(rescan.ok()) << rescan.status().ToString();
  }
  ExpectCleanExit(broker.pid);
  UnmountTestPool(*tp);
}

// subvol_snapshot: a snapshot of a pool subvolume (here a sandbox root its root chowned to
// 1000, which a node without CAP_FOWNER may not snapshot) into a pool directory, and of
// nothing else, nowhere else.
TEST_F(BrokerRootTest, SnapshotsOnlyItsPoolsSubvolumesIntoItsPool) {
  Result<TestPool> tp = MountTestPool("/var/tmp/broker_snap");
  ASSERT_TRUE(tp.ok()) << tp.status().ToString();
  const char* tmpl = tp->dir.c_str();
  const storage::PoolMount* m = &tp->mount;
  const std::string pool = m->pool_dir;
  const std::string root = pool + "/sandboxes/sbx_1", other = pool + "/other", plain = pool + "/sandboxes/plain";
  ASSERT_TRUE(storage::CreateSubvolume(nullptr, root).ok());
  ASSERT_EQ(::chown(root.c_str(), 1000, 1000), 0);
  ASSERT_TRUE(storage::CreateSubvolume(nullptr, other).ok());
  ASSERT_EQ(::mkdir(plain.c_str(), 0755), 0);
  ASSERT_EQ(::symlink(tmpl, (pool + "/snapshots/link").c_str()), 0);
  FilteredBroker broker = ForkFilteredBroker(BrokerConfig{.net_lock_dir = "/nonexistent", .pool_dir = pool});
  ASSERT_GT(broker.pid, 0);
  {
    BrokerClient client{std::move(broker.client_end)};
    Status st = client.SnapshotSubvolume(root, pool + "/snapshots/snap_1", /*read_only=*/true);
    ASSERT_TRUE(st.ok()) << st.ToString();
    struct stat snap;
    ASSERT_EQ(::stat((pool + "/snapshots/snap_1").c_str(), &snap), 0);
    EXPECT_EQ(snap.st_uid, 1000u);
    EXPECT_TRUE(storage::IsSubvolume(pool + "/snapshots/snap_1"));
    // Read-only as asked: the kernel refuses a write in it.
    EXPECT_NE(::mkdir((pool + "/snapshots/snap_1/x").c_str(), 0755), 0);
    EXPECT_EQ(errno, EROFS);
    st = client.SnapshotSubvolume(pool + "/snapshots/snap_1", pool + "/sandboxes/sbx_2", /*read_only=*/false);
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(::mkdir((pool + "/sandboxes/sbx_2/x").c_str(), 0755), 0);
    // Not of a subvolume outside sandboxes/, snapshots/ and templates/, nor of a plain
    // directory, nor into the pool's top, a link out of it, or a name with a slash.
    EXPECT_EQ(client.SnapshotSubvolume(other, pool + "/snapshots/s2", true).code(), StatusCode::kPermissionDenied);
    EXPECT_EQ(client.SnapshotSubvolume(plain, pool + "/snapshots/s3", true).code(), StatusCode::kPermissionDenied);
    EXPECT_EQ(client.SnapshotSubvolume(root, pool + "/s4", true).code(), StatusCode::kPermissionDenied);
    EXPECT_FALSE(client.SnapshotSubvolume(root, pool + "/snapshots/link/s5", true).ok());
    EXPECT_EQ(client.SnapshotSubvolume(pool, pool + "/snapshots/s6", true).code(), StatusCode::kPermissionDenied);
    EXPECT_EQ(client.SnapshotSubvolume(root, pool + "/snapshots/..", true).code(), StatusCode::kInvalidArgument);
    EXPECT_FALSE(client.SnapshotSubvolume(root, pool + "/snapshots/snap_1", true).ok());  // exists
    for (const char* s : {"s2", "s3", "s5", "s6"}) EXPECT_FALSE(storage::PathExists(pool + "/snapshots/" + s)) << s;
    EXPECT_FALSE(storage::PathExists(pool + "/s4"));
    EXPECT_FALSE(storage::PathExists(std::string(tmpl) + "/s5"));
    for (const char* s : {"/snapshots/snap_1", "/sandboxes/sbx_2", "/sandboxes/sbx_1"}) {
      EXPECT_TRUE(client.DeleteSubvolume(pool + s).ok()) << s;
    }
  }
  ExpectCleanExit(broker.pid);
  UnmountTestPool(*tp);
}

// subvol_create: an empty subvolume of root's (the jails' scratch trees) only in the pool's
// three directories; vm_state_dir: a sandbox root's .space-vm, made and given to the node's
// uid with the single-link files uid 0 left in it, never through a link.
TEST_F(BrokerRootTest, MakesRootsScratchTreesAndVmStateDirsOnlyInItsPool) {
  Result<TestPool> tp = MountTestPool("/var/tmp/broker_create");
  ASSERT_TRUE(tp.ok()) << tp.status().ToString();
  const std::string pool = tp->mount.pool_dir;
  const std::string root = pool + "/sandboxes/sbx_1", linked = pool + "/sandboxes/sbx_2";
  ASSERT_TRUE(storage::CreateSubvolume(nullptr, root).ok());
  ASSERT_TRUE(storage::CreateSubvolume(nullptr, linked).ok());
  ASSERT_EQ(::symlink(tp->dir.c_str(), (linked + "/" + runtime::kVmStateDir).c_str()), 0);
  const std::string state = root + "/" + runtime::kVmStateDir;
  FilteredBroker broker = ForkFilteredBroker(BrokerConfig{.net_lock_dir = "/nonexistent", .pool_dir = pool});
  ASSERT_GT(broker.pid, 0);
  {
    BrokerClient client{std::move(broker.client_end)};
    Status st = client.CreateSubvolume(pool + "/templates/tmp-1");
    ASSERT_TRUE(st.ok()) << st.ToString();
    struct stat sb;
    ASSERT_EQ(::stat((pool + "/templates/tmp-1").c_str(), &sb), 0);
    EXPECT_EQ(sb.st_uid, 0u);
    EXPECT_EQ(sb.st_mode & 07777, 0755u);
    EXPECT_TRUE(storage::IsSubvolume(pool + "/templates/tmp-1"));
    EXPECT_EQ(client.CreateSubvolume(pool + "/tmp-2").code(), StatusCode::kPermissionDenied);
    EXPECT_EQ(client.CreateSubvolume(root + "/nested").code(), StatusCode::kPermissionDenied);
    EXPECT_EQ(client.CreateSubvolume(pool + "/templates/..").code(), StatusCode::kInvalidArgument);
    EXPECT_FALSE(storage::PathExists(pool + "/tmp-2"));
    EXPECT_FALSE(storage::PathExists(root + "/nested"));

    // A disk image uid 0 left, a second link to a file, and a file of another owner.
    ASSERT_EQ(::mkdir(state.c_str(), 0700), 0);
    ASSERT_TRUE(WriteFileAtomic(state + "/disk.img", "disk", 0600).ok());
    ASSERT_TRUE(WriteFileAtomic(root + "/etc-shadow", "secret", 0600).ok());
    ASSERT_EQ(::link((root + "/etc-shadow").c_str(), (state + "/memory.state").c_str()), 0);
    ASSERT_TRUE(WriteFileAtomic(state + "/other", "x", 0600).ok());
    ASSERT_EQ(::chown((state + "/other").c_str(), 1000, 1000), 0);
    st = client.MakeVmStateDir(root);
    ASSERT_TRUE(st.ok()) << st.ToString();
    const uid_t node = HostSlots::NodeUid();
    auto owner = [](const std::string& p) {
      struct stat s;
      return ::lstat(p.c_str(), &s) == 0 ? s.st_uid : static_cast<uid_t>(-2);
    };
    EXPECT_EQ(owner(state), node);
    EXPECT_EQ(owner(state + "/disk.img"), node);
    // Readable by the tree jail, which exports it as another uid.
    struct stat sb_state, sb_disk;
    ASSERT_EQ(::stat(state.c_str(), &sb_state), 0);
    ASSERT_EQ(::stat((state + "/disk.img").c_str(), &sb_disk), 0);
    EXPECT_EQ(sb_state.st_mode & 07777, 0755u);
    EXPECT_EQ(sb_disk.st_mode & 07777, 0644u);
    EXPECT_EQ(owner(state + "/memory.state"), 0u);
    EXPECT_EQ(owner(state + "/other"), node);  // a restored snapshot's: the overflow uid
    // Made when absent, in a sandbox root only, and never through a link.
    ASSERT_TRUE(client.CreateSubvolume(pool + "/sandboxes/sbx_3").ok());
    EXPECT_TRUE(client.MakeVmStateDir(pool + "/sandboxes/sbx_3").ok());
    EXPECT_EQ(owner(pool + "/sandboxes/sbx_3/" + runtime::kVmStateDir), node);
    EXPECT_EQ(client.MakeVmStateDir(linked).code(), StatusCode::kPermissionDenied);
    EXPECT_EQ(owner(tp->dir), 0u);
    EXPECT_EQ(client.MakeVmStateDir(pool + "/templates/tmp-1").code(), StatusCode::kPermissionDenied);
    EXPECT_FALSE(storage::PathExists(pool + "/templates/tmp-1/" + runtime::kVmStateDir));
    for (const char* s : {"/templates/tmp-1", "/sandboxes/sbx_1", "/sandboxes/sbx_2", "/sandboxes/sbx_3"}) {
      EXPECT_TRUE(client.DeleteSubvolume(pool + s).ok()) << s;
    }
  }
  ExpectCleanExit(broker.pid);
  UnmountTestPool(*tp);
}

TEST_F(BrokerRootTest, OpensImportSourcesOnlyInsideItsImportRoot) {
  char tmpl[] = "/var/tmp/broker_import.XXXXXX";  // 0700, root's: the node could not search it
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string top = tmpl, root = top + "/imports";
  struct RemoveAtEnd {
    std::string dir;
    ~RemoveAtEnd() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } remove_at_end{top};
  ASSERT_EQ(::mkdir(root.c_str(), 0700), 0);
  ASSERT_TRUE(WriteFileAtomic(root + "/rootfs.tar", "tarball", 0600).ok());
  ASSERT_EQ(::mkdir((root + "/tree").c_str(), 0700), 0);
  ASSERT_EQ(::chown((root + "/tree").c_str(), 1000, 1000), 0);
  ASSERT_EQ(::mkfifo((root + "/fifo").c_str(), 0600), 0);
  ASSERT_EQ(::symlink("/etc", (root + "/etc-link").c_str()), 0);
  ASSERT_TRUE(WriteFileAtomic(top + "/outside", "secret", 0600).ok());
  ASSERT_EQ(::mkdir((top + "/elsewhere").c_str(), 0700), 0);
  // A directory that reads like one below the root, from a mount namespace of its own: the
  // import root's "tree" there is a bind of another directory (what a node could do with /etc).
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
  UniqueFd spoof_end(sv[0]), spoof_child(sv[1]);
  const pid_t spoofer = ::fork();
  ASSERT_GE(spoofer, 0);
  if (spoofer == 0) {
    UniqueFd fd;
    if (::unshare(CLONE_NEWNS) == 0 && ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0 &&
        ::mount((top + "/elsewhere").c_str(), (root + "/tree").c_str(), nullptr, MS_BIND, nullptr) == 0) {
      fd = UniqueFd(::open((root + "/tree").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    }
    if (!fd.valid() || !SendDatagram(spoof_child.get(), "tree", {fd.get()}).ok()) ::_exit(1);
    ::pause();  // keeps its namespace, so the path reads as it would
    ::_exit(0);
  }
  spoof_child.reset();
  Result<Datagram> spoofed = ReceiveDatagram(spoof_end.get());
  ASSERT_TRUE(spoofed.ok() && spoofed->fds.size() == 1);
  const std::string uid_dir = top + "/uid-slots";
  FilteredBroker broker =
      ForkFilteredBroker(BrokerConfig{.net_lock_dir = "/nonexistent", .uid_lock_dir = uid_dir, .import_root = root});
  ASSERT_GT(broker.pid, 0);
  {
    BrokerClient client{std::move(broker.client_end)};
    // idmap_tree, read-only, takes a directory below the root for what it is, and goes on to
    // check the process (here one in the host's user namespace, refused); never the spoof.
    Result<int64_t> slot = client.UidAcquire(-1);
    ASSERT_TRUE(slot.ok()) << slot.status().ToString();
    const uint32_t base = HostSlots::UidBase(*slot);
    UniqueFd self(static_cast<int>(::syscall(SYS_pidfd_open, spoofer, 0)));
    UniqueFd genuine(::open((root + "/tree").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    Result<UniqueFd> clone = client.IdmapTree(genuine.get(), self.get(), base, /*read_only=*/true);
    EXPECT_NE(clone.status().message().find("host's user namespace"), std::string::npos) << clone.status().ToString();
    clone = client.IdmapTree(spoofed->fds[0].get(), self.get(), base, /*read_only=*/true);
    EXPECT_EQ(clone.status().message().find("host's user namespace"), std::string::npos) << clone.status().ToString();
    EXPECT_FALSE(clone.ok());
    // Never writable, even below the root.
    clone = client.IdmapTree(genuine.get(), self.get(), base, /*read_only=*/false);
    EXPECT_EQ(clone.status().message().find("host's user namespace"), std::string::npos) << clone.status().ToString();
    // A tarball: open for reading.
    Result<UniqueFd> tar = client.OpenImportSource(root + "/rootfs.tar");
    ASSERT_TRUE(tar.ok()) << tar.status().ToString();
    char buf[16] = {};
    EXPECT_EQ(::read(tar->get(), buf, sizeof buf), 7);
    EXPECT_STREQ(buf, "tarball");
    // A directory: a name only (O_PATH), nothing to list with.
    Result<UniqueFd> tree = client.OpenImportSource(root + "/tree");
    ASSERT_TRUE(tree.ok()) << tree.status().ToString();
    EXPECT_EQ(::fcntl(tree->get(), F_GETFL) & O_PATH, O_PATH);
    // Outside the root, by name, by "..", or through a link (resolved inside: no etc there).
    EXPECT_EQ(client.OpenImportSource(top + "/outside").status().code(), StatusCode::kPermissionDenied);
    EXPECT_EQ(client.OpenImportSource("/etc/shadow").status().code(), StatusCode::kPermissionDenied);
    Result<UniqueFd> up = client.OpenImportSource(root + "/../outside");
    EXPECT_FALSE(up.ok());
    EXPECT_EQ(client.OpenImportSource(root + "/etc-link/shadow").status().code(), StatusCode::kNotFound);
    // Neither a directory nor a tarball.
    EXPECT_EQ(client.OpenImportSource(root + "/fifo").status().code(), StatusCode::kInvalidArgument);
  }
  ExpectCleanExit(broker.pid);
  ::kill(spoofer, SIGKILL);
  ::waitpid(spoofer, nullptr, 0);
}

TEST_F(BrokerRootTest, WritesSandboxCgroupsOnlyUnderItsNameOverItsSocket) {
  ASSERT_TRUE(IsNodeCgroupName(kTestCgroupName));
  EXPECT_FALSE(IsNodeCgroupName("space-0000000000000g00"));
  EXPECT_FALSE(IsNodeCgroupName("space"));
  EXPECT_FALSE(IsNodeCgroupName("../space-00000000b70c3e57"));
  char tmpl[] = "/tmp/broker_test.XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
  Broker broker(BrokerConfig{.net_lock_dir = tmpl, .cgroup_name = kTestCgroupName});
  std::thread server([&] { Serve(sv[1], &broker); });
  {
    BrokerClient client{UniqueFd(sv[0])};
    auto acts = std::make_shared<BrokerCgroupActs>(&client, CgroupRuntime::kNs);
    // The parents too are the broker's to make (cgroup_parents): the v1 roots are 0555.
    auto cg = runtime::ns::Cgroups::Probe("/sys/fs/cgroup", kTestCgroupName, acts);
    ASSERT_TRUE(cg.ok()) << cg.status().ToString();
    const std::string in_pids = cg->PathFor("sbx_brokertest", "pids");
    const std::string parent = in_pids.substr(0, in_pids.rfind('/'));
    EXPECT_EQ(::access(parent.c_str(), F_OK), 0) << parent;
    auto local = runtime::ns::Cgroups::Probe("/sys/fs/cgroup", kTestCgroupName);  // for placing a stranger
    ASSERT_TRUE(local.ok()) << local.status().ToString();
    runtime::Limits limits{.cpus = 0.5, .memory_bytes = 64ull << 20, .pids_max = 32};
    ASSERT_TRUE(cg->Create("sbx_brokertest", limits).ok());
    auto pids_max = ReadFileToString(cg->PathFor("sbx_brokertest", "pids") + "/pids.max", 64);
    ASSERT_TRUE(pids_max.ok());
    EXPECT_EQ(*pids_max, "32\n");
    limits.pids_max = 48;
    ASSERT_TRUE(cg->UpdateLimits("sbx_brokertest", limits).ok());
    EXPECT_EQ(*ReadFileToString(cg->PathFor("sbx_brokertest", "pids") + "/pids.max", 64), "48\n");

    // This test's own child is not a child of the broker's parent: refused, and not moved.
    Child stranger;
    StartChild(&stranger, false, 0);
    EXPECT_EQ(cg->Attach("sbx_brokertest", stranger.pid, stranger.pidfd.get()).code(), StatusCode::kPermissionDenied);
    auto procs = ReadFileToString(cg->PathFor("sbx_brokertest", "pids") + "/cgroup.procs", 4096);
    EXPECT_EQ(procs.ok() ? *procs : "?", "");

    // Freeze, kill and remove a populated cgroup through the broker (placed in-process).
    ASSERT_TRUE(local->Attach("sbx_brokertest", stranger.pid).ok());
    ASSERT_TRUE(cg->Freeze("sbx_brokertest").ok());
    ASSERT_TRUE(cg->Thaw("sbx_brokertest").ok());
    ASSERT_TRUE(cg->KillAll("sbx_brokertest").ok());
    ::waitpid(stranger.pid, nullptr, 0);
    stranger.pid = -1;
    EXPECT_TRUE(cg->Remove("sbx_brokertest").ok());
    EXPECT_TRUE(cg->PathFor("sbx_brokertest", "pids").empty() ||
                ::access(cg->PathFor("sbx_brokertest", "pids").c_str(), F_OK) != 0);

    // A path in the id never reaches the broker's filesystem calls.
    Request evil;
    evil.op = Op::kCgroupCreate;
    evil.id = "../../escape";
    EXPECT_EQ(client.CgroupAct(evil).code(), StatusCode::kInvalidArgument);
    // And the parents go through the broker, only its own (the name is its, not the request's).
    EXPECT_TRUE(cg->RemoveParents().ok());
    EXPECT_NE(::access(parent.c_str(), F_OK), 0) << parent;
    EXPECT_TRUE(cg->RemoveParents().ok());  // gone already: fine
  }
  server.join();
  ::close(sv[1]);
  ASSERT_EQ(std::system((std::string("rm -rf ") + tmpl).c_str()), 0);
}

}  // namespace
}  // namespace space::broker
