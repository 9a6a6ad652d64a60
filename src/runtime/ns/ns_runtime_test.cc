// Integration tests of the ns runtime: real namespaces, cgroups and mounts. Root only.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mount.h>

#include <chrono>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/syscall.h"
#include "runtime/runtime.h"

namespace space::runtime {
namespace {

namespace fs = std::filesystem;

// Far above the node's own allocations (from 1000000), multiple of 65536.
constexpr uint32_t kUidBase = 30518u * kUidRangeSize;

std::string MakeTempDir(const std::string& prefix, const std::string& parent = "/tmp") {
  std::string tmpl = parent + "/" + prefix + "XXXXXX";
  char* p = ::mkdtemp(tmpl.data());
  return p ? std::string(p) : std::string();
}

// A minimal busybox root: bin/busybox and a few applet symlinks.
void BuildRootfs(const std::string& root) {
  fs::create_directories(root + "/bin");
  fs::copy_file("/bin/busybox", root + "/bin/busybox");
  for (const char* applet : {"sh", "id", "cat", "ls", "echo"}) {
    fs::create_symlink("busybox", root + "/bin/" + applet);
  }
  fs::create_directories(root + "/tmp");
  fs::permissions(root + "/tmp", fs::perms::all | fs::perms::sticky_bit);
}

// Reads "key=value" lines from the channel until "END".
std::map<std::string, std::string> ReadReport(int fd) {
  std::map<std::string, std::string> out;
  std::string buf;
  char chunk[4096];
  while (buf.find("END\n") == std::string::npos) {
    pollfd pfd{fd, POLLIN, 0};
    if (::poll(&pfd, 1, 10000) <= 0) break;
    ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n <= 0) break;
    buf.append(chunk, static_cast<size_t>(n));
  }
  size_t pos = 0;
  while (pos < buf.size()) {
    size_t end = buf.find('\n', pos);
    std::string line = buf.substr(pos, end - pos);
    pos = end + 1;
    size_t eq = line.find('=');
    if (eq != std::string::npos) out[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return out;
}

// True when `fd` echoes a byte back within `timeout_ms`.
bool Echoes(int fd, int timeout_ms) {
  char c = 'x';
  if (::write(fd, &c, 1) != 1) return false;
  pollfd pfd{fd, POLLIN, 0};
  if (::poll(&pfd, 1, timeout_ms) != 1) return false;
  return ::read(fd, &c, 1) == 1 && c == 'x';
}

std::string ReadTrimmed(const std::string& path) {
  Result<std::string> s = ReadFileToString(path);
  if (!s.ok()) return "<" + s.status().message() + ">";
  std::string v = *s;
  while (!v.empty() && v.back() == '\n') v.pop_back();
  return v;
}

class NsRuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (namespaces, cgroups, idmapped mounts)";
    base_ = MakeTempDir("space-runtime-test-");
    ASSERT_FALSE(base_.empty());
    rootfs_ = base_ + "/rootfs";
    BuildRootfs(rootfs_);
    // A node keeps its run dir on tmpfs (/run); /dev/shm stands in for it here.
    run_base_ = MakeTempDir("space-runtime-test-run-", "/dev/shm");
    if (run_base_.empty()) run_base_ = MakeTempDir("space-runtime-test-run-");
    ASSERT_FALSE(run_base_.empty());
    config_.run_dir = run_base_ + "/run";
    config_.cgroup_name = "space-test-" + std::to_string(::getpid());
    Result<std::unique_ptr<NsRuntime>> rt = NsRuntime::Create(config_);
    ASSERT_TRUE(rt.ok()) << rt.status().ToString();
    runtime_ = std::move(rt).value();
  }

  void TearDown() override {
    if (runtime_) {
      Result<std::set<std::string>> ids = runtime_->ListPresent();
      if (ids.ok()) {
        for (const std::string& id : *ids) EXPECT_TRUE(runtime_->Destroy(id).ok()) << id;
      }
      for (const char* h : {"cpu", "memory", "pids", "freezer", "cpuacct", "blkio", "devices",
                            "cpuset", "systemd", "unified"}) {
        ::rmdir(("/sys/fs/cgroup/" + std::string(h) + "/" + config_.cgroup_name).c_str());
      }
      ::rmdir(("/sys/fs/cgroup/" + config_.cgroup_name).c_str());
    }
    if (!base_.empty()) fs::remove_all(base_);
    if (!run_base_.empty()) fs::remove_all(run_base_);
  }

  SandboxSpec Spec(const std::string& id, int slot = 0) {
    SandboxSpec s;
    s.id = id;
    s.rootfs = rootfs_;
    s.hostname = "box-" + id;
    s.uid_base = kUidBase + static_cast<uint32_t>(slot) * kUidRangeSize;
    s.limits.cpus = 0.5;
    s.limits.memory_bytes = 256ull << 20;
    s.limits.pids_max = 64;
    s.guest_binary = RUNTIME_TEST_INIT;
    s.guest_env = {"PATH=/bin", "TEST_MODE=probe"};
    return s;
  }

  std::string CgroupDir(const std::string& hierarchy, const std::string& id) const {
    if (runtime_->cgroup_version() == "v2")
      return "/sys/fs/cgroup/" + config_.cgroup_name + "/" + id;
    return "/sys/fs/cgroup/" + hierarchy + "/" + config_.cgroup_name + "/" + id;
  }

  std::string base_, run_base_, rootfs_;
  RuntimeConfig config_;
  std::unique_ptr<NsRuntime> runtime_;
};

TEST_F(NsRuntimeTest, LaunchIsolatesAndDestroyCleansUp) {
  SandboxSpec spec = Spec("sbx_basic");
  Result<LaunchedSandbox> sb = runtime_->Launch(spec);
  ASSERT_TRUE(sb.ok()) << sb.status().ToString();
  EXPECT_GT(sb->pid, 0);
  EXPECT_TRUE(sb->pidfd.valid());
  std::vector<std::string> names;
  for (auto& [name, us] : sb->steps_us) names.push_back(name);
  for (const char* want :
       {"clone", "id_maps", "idmap_root", "child_setup", "mount_proc", "seccomp", "exec"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  }

  std::map<std::string, std::string> r = ReadReport(sb->channel.get());
  EXPECT_EQ(r["pid"], "1");
  EXPECT_EQ(r["uid"], "0");
  EXPECT_EQ(r["gid"], "0");
  EXPECT_EQ(r["hostname"], "box-sbx_basic");
  EXPECT_EQ(r["ifaces"], "lo");
  EXPECT_LE(std::stoi(r["proc_pids"]), 3) << "host processes visible";
  for (const char* f : {"kcore", "keys", "timer_list", "sched_debug", "sysrq-trigger"}) {
    // Masked with /dev/null (1:3) wherever this kernel has the file at all.
    std::string want = fs::exists(std::string("/proc/") + f) ? "1:3" : "absent";
    EXPECT_EQ(r[std::string("mask_") + f], want) << f;
  }
  if (fs::exists("/proc/acpi")) {
    EXPECT_EQ(r["acpi_fs"], "tmpfs");
  }
  EXPECT_EQ(r["sys_ro"], "1");
  EXPECT_EQ(r["sys_fs"], "sysfs");
  EXPECT_EQ(r["proc_sys_ro"], "1");
  EXPECT_EQ(r["keyctl"], "EPERM");
  EXPECT_EQ(r["bpf"], "EPERM");
  EXPECT_EQ(r["clone3"], "ENOSYS");
  EXPECT_EQ(r["open_tree"], "EPERM");
  EXPECT_EQ(r["unshare_user"], "EPERM");
  EXPECT_EQ(r["nnp"], "1");
  EXPECT_EQ(r["fds"], "0,1,2,3") << "only stdio and the channel may be inherited";
  EXPECT_EQ(r["cgroup_roots"], "1");
  EXPECT_EQ(r["busybox_uid"], "0") << "idmapped root: on-disk root is sandbox root";
  EXPECT_EQ(r["create"], "0");
  EXPECT_EQ(r["ptmx"], "0");
  EXPECT_EQ(r["dev_null"], "0");
  EXPECT_EQ(r["sh_id"], "0");
  EXPECT_EQ(r["sh_tmp"], "hi");

  // Host view: sandbox root is uid_base.
  std::string status = ReadTrimmed("/proc/" + std::to_string(sb->pid) + "/status");
  std::string u = std::to_string(spec.uid_base);
  EXPECT_NE(status.find("Uid:\t" + u + "\t" + u + "\t" + u + "\t" + u), std::string::npos)
      << status;
  // Idmapped root: what sandbox root created is owned by uid 0 on disk.
  struct stat st;
  ASSERT_EQ(::stat((rootfs_ + "/created_by_root").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_gid, 0u);

  // Limits.
  if (runtime_->cgroup_version() == "v1") {
    EXPECT_EQ(ReadTrimmed(CgroupDir("memory", spec.id) + "/memory.limit_in_bytes"),
              std::to_string(256ull << 20));
    EXPECT_EQ(ReadTrimmed(CgroupDir("pids", spec.id) + "/pids.max"), "64");
    EXPECT_EQ(ReadTrimmed(CgroupDir("cpu", spec.id) + "/cpu.cfs_quota_us"), "50000");
    EXPECT_EQ(ReadTrimmed(CgroupDir("cpu", spec.id) + "/cpu.cfs_period_us"), "100000");
    EXPECT_NE(
        ReadTrimmed(CgroupDir("freezer", spec.id) + "/cgroup.procs").find(std::to_string(sb->pid)),
        std::string::npos);
  } else {
    EXPECT_EQ(ReadTrimmed(CgroupDir("", spec.id) + "/memory.max"), std::to_string(256ull << 20));
    EXPECT_EQ(ReadTrimmed(CgroupDir("", spec.id) + "/pids.max"), "64");
    EXPECT_EQ(ReadTrimmed(CgroupDir("", spec.id) + "/cpu.max"), "50000 100000");
  }

  Result<std::set<std::string>> present = runtime_->ListPresent();
  ASSERT_TRUE(present.ok());
  EXPECT_EQ(present->count(spec.id), 1u);

  pid_t pid = sb->pid;
  ASSERT_TRUE(runtime_->Destroy(spec.id).ok());
  EXPECT_NE(::kill(pid, 0), 0);
  EXPECT_FALSE(fs::exists(config_.run_dir + "/" + spec.id));
  for (const char* h : {"cpu", "memory", "pids", "freezer"})
    EXPECT_FALSE(fs::exists(CgroupDir(h, spec.id))) << h;
  present = runtime_->ListPresent();
  ASSERT_TRUE(present.ok());
  EXPECT_EQ(present->count(spec.id), 0u);
  // Idempotent.
  EXPECT_TRUE(runtime_->Destroy(spec.id).ok());
}

TEST_F(NsRuntimeTest, FreezeAndThaw) {
  SandboxSpec spec = Spec("sbx_freeze");
  spec.guest_env = {"TEST_MODE=quiet"};
  Result<LaunchedSandbox> sb = runtime_->Launch(spec);
  ASSERT_TRUE(sb.ok()) << sb.status().ToString();
  ReadReport(sb->channel.get());
  ASSERT_TRUE(Echoes(sb->channel.get(), 5000));

  ASSERT_TRUE(runtime_->Freeze(spec.id).ok());
  if (runtime_->cgroup_version() == "v1") {
    EXPECT_EQ(ReadTrimmed(CgroupDir("freezer", spec.id) + "/freezer.state"), "FROZEN");
  }
  EXPECT_FALSE(Echoes(sb->channel.get(), 100)) << "a frozen sandbox answered";

  ASSERT_TRUE(runtime_->Thaw(spec.id).ok());
  char c;
  pollfd pfd{sb->channel.get(), POLLIN, 0};
  ASSERT_EQ(::poll(&pfd, 1, 5000), 1) << "the byte sent while frozen is answered after thaw";
  ASSERT_EQ(::read(sb->channel.get(), &c, 1), 1);
  EXPECT_TRUE(Echoes(sb->channel.get(), 5000));

  // Destroy works on a frozen sandbox too.
  ASSERT_TRUE(runtime_->Freeze(spec.id).ok());
  EXPECT_TRUE(runtime_->Destroy(spec.id).ok());
}

// A warm-pool hand-out rewrites limits of a running sandbox: raising memory must work on v1
// too, where memsw has to move before limit_in_bytes.
TEST_F(NsRuntimeTest, UpdateLimitsRaisesAndLowers) {
  SandboxSpec spec = Spec("sbx_limits");
  spec.guest_env = {"TEST_MODE=quiet"};
  Result<LaunchedSandbox> sb = runtime_->Launch(spec);
  ASSERT_TRUE(sb.ok()) << sb.status().ToString();
  const bool v2 = runtime_->cgroup_version() == "v2";
  const std::string mem = CgroupDir("memory", spec.id) + (v2 ? "/memory.max" : "/memory.limit_in_bytes");
  for (uint64_t mib : {1024ull, 128ull, 512ull}) {
    Limits l = spec.limits;
    l.memory_bytes = mib << 20;
    l.cpus = 2;
    ASSERT_TRUE(runtime_->UpdateLimits(spec.id, l).ok()) << mib;
    EXPECT_EQ(ReadTrimmed(mem), std::to_string(mib << 20));
  }
  if (!v2) {
    EXPECT_EQ(ReadTrimmed(CgroupDir("cpu", spec.id) + "/cpu.cfs_quota_us"), "200000");
  }
  Limits bad = spec.limits;
  bad.cpus = -1;
  EXPECT_FALSE(runtime_->UpdateLimits(spec.id, bad).ok());
  EXPECT_FALSE(runtime_->UpdateLimits("../x", spec.limits).ok());
  EXPECT_TRUE(runtime_->Destroy(spec.id).ok());
  EXPECT_FALSE(runtime_->UpdateLimits(spec.id, spec.limits).ok()) << "no cgroup any more";
}

TEST(PidsMaxFor, OneTaskPer2MibWithinBounds) {
  EXPECT_EQ(PidsMaxFor(512ull << 20), 256u);
  EXPECT_EQ(PidsMaxFor(4ull << 20), 128u);
  EXPECT_EQ(PidsMaxFor(4096ull << 20), 2048u);
  EXPECT_EQ(PidsMaxFor(1ull << 40), 8192u);
  EXPECT_EQ(Limits{}.pids_max, 256u);
}

// Usage counts the forks pids.max refused: a host child joins the sandbox's cgroups with the
// limit already reached and tries to fork.
TEST_F(NsRuntimeTest, UsageCountsRefusedForks) {
  SandboxSpec spec = Spec("sbx_pidsev");
  spec.guest_env = {"TEST_MODE=quiet"};
  Result<LaunchedSandbox> sb = runtime_->Launch(spec);
  ASSERT_TRUE(sb.ok()) << sb.status().ToString();
  // Init's tasks already fill a limit of 1.
  ASSERT_TRUE(WriteSmallFile(CgroupDir("pids", spec.id) + "/pids.max", "1").ok());
  Result<ResourceUsage> before = runtime_->Usage(spec.id);
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  EXPECT_EQ(before->oom_kills, 0u);
  const std::string procs = CgroupDir("pids", spec.id) + "/cgroup.procs";
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Joining is allowed past pids.max (only fork is refused); then fork must fail.
    if (!WriteSmallFile(procs, std::to_string(::getpid())).ok()) ::_exit(2);
    pid_t grandchild = ::fork();
    if (grandchild == 0) ::_exit(0);
    ::_exit(grandchild < 0 && errno == EAGAIN ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  Result<ResourceUsage> after = runtime_->Usage(spec.id);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_GE(after->pids_max_hits, 1u);
  EXPECT_TRUE(runtime_->Destroy(spec.id).ok());
}

TEST_F(NsRuntimeTest, DestroyAfterNodeRestartUsesCgroup) {
  SandboxSpec spec = Spec("sbx_orphan");
  spec.guest_env = {"TEST_MODE=quiet"};
  Result<LaunchedSandbox> sb = runtime_->Launch(spec);
  ASSERT_TRUE(sb.ok()) << sb.status().ToString();
  ReadReport(sb->channel.get());
  // A fresh runtime knows nothing of the sandbox but its cgroup and run dir.
  Result<std::unique_ptr<NsRuntime>> fresh = NsRuntime::Create(config_);
  ASSERT_TRUE(fresh.ok());
  Result<std::set<std::string>> present = (*fresh)->ListPresent();
  ASSERT_TRUE(present.ok());
  EXPECT_EQ(present->count(spec.id), 1u);
  ASSERT_TRUE((*fresh)->Destroy(spec.id).ok());
  // Init was this process's child: it is dead (a zombie until reaped here).
  int status = 0;
  ASSERT_EQ(::waitpid(sb->pid, &status, 0), sb->pid);
  EXPECT_TRUE(WIFSIGNALED(status));
  EXPECT_FALSE(fs::exists(config_.run_dir + "/" + spec.id));
  EXPECT_FALSE(fs::exists(CgroupDir("memory", spec.id)));
}

TEST_F(NsRuntimeTest, SymlinkedMountPointIsRejected) {
  fs::remove_all(rootfs_ + "/proc");
  fs::create_symlink("/etc", rootfs_ + "/proc");
  Result<LaunchedSandbox> sb = runtime_->Launch(Spec("sbx_symlink"));
  ASSERT_FALSE(sb.ok());
  EXPECT_EQ(sb.status().code(), StatusCode::kInvalidArgument) << sb.status().ToString();
  EXPECT_NE(sb.status().message().find("step mount_points"), std::string::npos)
      << sb.status().message();
  EXPECT_FALSE(fs::exists(config_.run_dir + "/sbx_symlink"));
  EXPECT_FALSE(fs::exists(CgroupDir("memory", "sbx_symlink")));
}

TEST_F(NsRuntimeTest, FailingStepsAreNamed) {
  struct Case {
    const char* name;
    void (*mutate)(SandboxSpec*, const std::string& base);
    const char* want;
  };
  const Case cases[] = {
      {"missing rootfs",
       [](SandboxSpec* s, const std::string&) { s->rootfs = "/nonexistent/rootfs"; },
       "sandbox sbx_fail: step mount_points: open /nonexistent/rootfs: ENOENT"},
      {"missing guest",
       [](SandboxSpec* s, const std::string&) { s->guest_binary = "/nonexistent/spaced"; },
       "sandbox sbx_fail: step open_guest: open /nonexistent/spaced: ENOENT"},
      // A non-executable guest fails in the child, at its last step.
      {"guest not executable",
       [](SandboxSpec* s, const std::string& base) {
         s->guest_binary = base + "/not-executable";
         (void)WriteFileAtomic(s->guest_binary, "#!/bin/sh\n", 0644);
       },
       "sandbox sbx_fail: step exec: execveat "},
      {"uid_base zero", [](SandboxSpec* s, const std::string&) { s->uid_base = 0; },
       "step validate_spec: uid_base"},
      {"bad id", [](SandboxSpec* s, const std::string&) { s->id = "../etc"; },
       "step validate_spec: sandbox id"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    SandboxSpec spec = Spec("sbx_fail");
    c.mutate(&spec, base_);
    Result<LaunchedSandbox> sb = runtime_->Launch(spec);
    ASSERT_FALSE(sb.ok());
    EXPECT_NE(sb.status().message().find(c.want), std::string::npos) << sb.status().message();
    EXPECT_FALSE(fs::exists(config_.run_dir + "/sbx_fail"));
    EXPECT_FALSE(fs::exists(CgroupDir("memory", "sbx_fail")));
  }
}

// A step that fails in the parent after clone (here: idmapping a root on a filesystem that
// refuses idmapped mounts) must kill the waiting child and return promptly.
TEST_F(NsRuntimeTest, FailureAfterCloneKillsTheChild) {
  std::string lower = base_ + "/lower", upper = base_ + "/upper", work = base_ + "/work",
              merged = base_ + "/merged";
  for (const auto& d : {upper, work, merged}) fs::create_directories(d);
  fs::rename(rootfs_, lower);
  std::string opts = "lowerdir=" + lower + ",upperdir=" + upper + ",workdir=" + work;
  ASSERT_EQ(::mount("overlay", merged.c_str(), "overlay", 0, opts.c_str()), 0) << strerror(errno);
  SandboxSpec spec = Spec("sbx_fail");
  spec.rootfs = merged;
  auto t0 = std::chrono::steady_clock::now();
  Result<LaunchedSandbox> sb = runtime_->Launch(spec);
  auto took = std::chrono::steady_clock::now() - t0;
  ::umount2(merged.c_str(), MNT_DETACH);
  if (sb.ok()) GTEST_SKIP() << "this kernel idmaps overlayfs; the failure path is not reachable this way";
  EXPECT_NE(sb.status().message().find("step idmap_root"), std::string::npos) << sb.status().message();
  EXPECT_LT(took, std::chrono::seconds(4));
  EXPECT_FALSE(fs::exists(config_.run_dir + "/sbx_fail"));
  EXPECT_FALSE(fs::exists(CgroupDir("memory", "sbx_fail")));
}

TEST_F(NsRuntimeTest, DuplicateIdIsConflict) {
  SandboxSpec spec = Spec("sbx_dup");
  spec.guest_env = {"TEST_MODE=quiet"};
  Result<LaunchedSandbox> a = runtime_->Launch(spec);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  Result<LaunchedSandbox> b = runtime_->Launch(spec);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kConflict) << b.status().ToString();
  EXPECT_TRUE(runtime_->Destroy(spec.id).ok());
}

// Median launch and destroy times; printed for the record, loosely bounded.
TEST_F(NsRuntimeTest, LaunchLatency) {
  constexpr int kRuns = 50;
  std::vector<int64_t> launch_us, destroy_us;
  std::map<std::string, std::vector<int64_t>> per_step;
  for (int i = 0; i < kRuns; ++i) {
    SandboxSpec spec = Spec("sbx_bench_" + std::to_string(i), i % 4);
    spec.guest_env = {"TEST_MODE=quiet"};
    int64_t t0 = MonoNowNs();
    Result<LaunchedSandbox> sb = runtime_->Launch(spec);
    int64_t t1 = MonoNowNs();
    ASSERT_TRUE(sb.ok()) << sb.status().ToString();
    launch_us.push_back((t1 - t0) / 1000);
    for (auto& [name, us] : sb->steps_us) per_step[name].push_back(us);
    int64_t t2 = MonoNowNs();
    ASSERT_TRUE(runtime_->Destroy(spec.id).ok());
    destroy_us.push_back((MonoNowNs() - t2) / 1000);
  }
  auto median = [](std::vector<int64_t> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  auto p90 = [](std::vector<int64_t> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() * 9 / 10];
  };
  std::string steps;
  for (auto& [name, v] : per_step) steps += " " + name + "=" + std::to_string(median(v));
  std::printf("launch p50=%lldus p90=%lldus destroy p50=%lldus p90=%lldus\nstep medians (us):%s\n",
              static_cast<long long>(median(launch_us)), static_cast<long long>(p90(launch_us)),
              static_cast<long long>(median(destroy_us)), static_cast<long long>(p90(destroy_us)),
              steps.c_str());
  EXPECT_LT(median(launch_us), 1'000'000);
}

}  // namespace
}  // namespace space::runtime
