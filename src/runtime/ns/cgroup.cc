#include "runtime/ns/cgroup.h"

#include <dirent.h>
#include <linux/magic.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <thread>

#include "common/clock.h"
#include "common/syscall.h"

namespace space::runtime::ns {
namespace {

constexpr int64_t kMs = 1'000'000;
// How long state changes may take before we give up: freezing waits for every task to
// reach a freezable point; emptying waits for SIGKILLed tasks to finish exiting.
constexpr int64_t kFreezeTimeoutNs = 5000 * kMs;
constexpr int64_t kKillTimeoutNs = 5000 * kMs;
constexpr int64_t kRmdirTimeoutNs = 1000 * kMs;
constexpr uint64_t kCpuPeriodUs = 100000;

// v1 hierarchies the sandbox joins. The four with limits or lifecycle roles are
// required; the others are joined only so that, after unshare(CLONE_NEWCGROUP), the
// sandbox's view of every hierarchy is rooted at its own cgroup instead of the host's.
struct V1Hierarchy {
  const char* dir;
  bool required;
};
constexpr V1Hierarchy kV1Hierarchies[] = {
    {"cpu", true},    {"memory", true},   {"pids", true},    {"freezer", true},  {"cpuacct", false},
    {"blkio", false}, {"devices", false}, {"cpuset", false}, {"systemd", false}, {"unified", false},
};

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

void SleepMs(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

// Writes `data` to a control file; ENOENT is success when `optional`.
Status WriteControl(const std::string& path, const std::string& data, bool optional = false) {
  Status st = WriteSmallFile(path, data);
  if (!st.ok() && optional && !Exists(path)) return Status::Ok();
  return st;
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// True when cgroup.events (v2) has the line "<key> <value>".
Result<bool> EventIs(const std::string& dir, const std::string& key, char value) {
  ASSIGN_OR_RETURN(std::string events, ReadFileToString(dir + "/cgroup.events", 4096));
  return events.find(key + " " + value) != std::string::npos;
}

}  // namespace

// The writes, done in this process on a layout Probe made.
class Cgroups::LocalActs final : public CgroupActs {
 public:
  explicit LocalActs(Cgroups layout) : l_(std::move(layout)) {}

  Status Create(const std::string& id, const Limits& limits) override {
    // Undo only what this call made: an existing directory may belong to a live sandbox.
    std::vector<std::string> made;
    auto undo = [&made](Status st) {
      for (auto it = made.rbegin(); it != made.rend(); ++it) ::rmdir(it->c_str());
      return st;
    };
    for (const Hierarchy& h : l_.hierarchies_) {
      const std::string dir = l_.Dir(h, id);
      if (::mkdir(dir.c_str(), 0755) != 0) return undo(ErrnoStatus("mkdir", dir, errno));
      made.push_back(dir);
      if (h.cpuset) {
        for (const char* f : {"cpuset.cpus", "cpuset.mems"}) {
          Result<std::string> v = ReadFileToString(h.parent + "/" + f, 4096);
          Status st = v.ok() ? WriteControl(dir + "/" + f, Trim(*v)) : v.status();
          if (!st.ok()) return undo(st);
        }
      }
    }
    Status st = WriteLimits(id, limits);
    return st.ok() ? st : undo(st);
  }

  Status UpdateLimits(const std::string& id, const Limits& limits) override {
    const std::string mem_dir = l_.PathFor(id, "memory");
    if (!Exists(mem_dir)) return NotFound("sandbox " + id + ": no cgroup");
    if (!l_.v2_) {
      // v1 keeps memsw.limit_in_bytes >= limit_in_bytes at every moment: raising the limit
      // needs memsw raised first, which WriteLimits (limit first) would have refused.
      Result<std::string> cur = ReadFileToString(mem_dir + "/memory.limit_in_bytes", 64);
      uint64_t current = 0;
      if (cur.ok()) {
        std::string v = Trim(*cur);
        std::from_chars(v.data(), v.data() + v.size(), current);
      }
      if (limits.memory_bytes > current) {
        RETURN_IF_ERROR(WriteControl(mem_dir + "/memory.memsw.limit_in_bytes",
                                     std::to_string(limits.memory_bytes), true));
      }
    }
    return WriteLimits(id, limits);
  }

  Status Attach(const std::string& id, pid_t pid, int) override {
    const std::string p = std::to_string(pid);
    for (const Hierarchy& h : l_.hierarchies_) {
      RETURN_IF_ERROR(WriteControl(l_.Dir(h, id) + "/cgroup.procs", p));
    }
    return Status::Ok();
  }

  Status SetFrozen(const std::string& id, bool frozen) override {
    const Hierarchy* h = l_.Find("freezer");
    if (h == nullptr) return Unavailable("no freezer hierarchy");
    const std::string dir = l_.Dir(*h, id);
    if (!Exists(dir)) return NotFound("sandbox " + id + ": no cgroup");
    if (l_.v2_) return WriteControl(dir + "/cgroup.freeze", frozen ? "1" : "0");
    return WriteControl(dir + "/freezer.state", frozen ? "FROZEN" : "THAWED");
  }

  Status Kill(const std::string& id) override {
    if (l_.v2_) {
      const std::string dir = l_.Dir(l_.hierarchies_.front(), id);
      if (!Exists(dir)) return Status::Ok();
      // cgroup.kill (Linux 5.14) kills atomically, including tasks forking meanwhile.
      if (Exists(dir + "/cgroup.kill")) return WriteControl(dir + "/cgroup.kill", "1");
    }
    ASSIGN_OR_RETURN(std::vector<pid_t> pids, l_.Procs(id));
    for (pid_t pid : pids) ::kill(pid, SIGKILL);
    return Status::Ok();
  }

  Status Remove(const std::string& id) override {
    for (const Hierarchy& h : l_.hierarchies_) {
      const std::string dir = l_.Dir(h, id);
      if (::rmdir(dir.c_str()) == 0 || errno == ENOENT) continue;
      // EBUSY: a killed task is still on its way out of the cgroup.
      if (errno == EBUSY) return Unavailable("rmdir " + dir + ": still busy");
      return ErrnoStatus("rmdir", dir, errno);
    }
    return Status::Ok();
  }

 private:
  Status WriteLimits(const std::string& id, const Limits& limits) const {
    const uint64_t quota_us =
        std::max<uint64_t>(1000, static_cast<uint64_t>(std::llround(limits.cpus * kCpuPeriodUs)));
    const std::string mem = std::to_string(limits.memory_bytes);
    const std::string pids = std::to_string(limits.pids_max);
    const std::string mem_dir = l_.PathFor(id, "memory");
    const std::string pids_dir = l_.PathFor(id, "pids");
    const std::string cpu_dir = l_.PathFor(id, "cpu");
    if (l_.v2_) {
      RETURN_IF_ERROR(WriteControl(mem_dir + "/memory.max", mem));
      // Memory means memory: no swapping past the limit (absent without swap accounting).
      RETURN_IF_ERROR(WriteControl(mem_dir + "/memory.swap.max", "0", true));
      RETURN_IF_ERROR(WriteControl(pids_dir + "/pids.max", pids));
      RETURN_IF_ERROR(WriteControl(cpu_dir + "/cpu.max",
                                   std::to_string(quota_us) + " " + std::to_string(kCpuPeriodUs)));
      return Status::Ok();
    }
    RETURN_IF_ERROR(WriteControl(mem_dir + "/memory.limit_in_bytes", mem));
    // memsw must be >= limit_in_bytes, so it is written second; equal means no swap.
    RETURN_IF_ERROR(WriteControl(mem_dir + "/memory.memsw.limit_in_bytes", mem, true));
    RETURN_IF_ERROR(WriteControl(pids_dir + "/pids.max", pids));
    RETURN_IF_ERROR(WriteControl(cpu_dir + "/cpu.cfs_period_us", std::to_string(kCpuPeriodUs)));
    RETURN_IF_ERROR(WriteControl(cpu_dir + "/cpu.cfs_quota_us", std::to_string(quota_us)));
    return Status::Ok();
  }

  Status MakeParents() override { return Layout(l_.root_, l_.name_, /*make=*/true).status(); }

  Status RemoveParents() override { return l_.RemoveParentsHere(); }

  const Cgroups l_;  // the layout only (its acts_ is empty)
};

Result<Cgroups> Cgroups::Probe(const std::string& root, const std::string& name, std::shared_ptr<CgroupActs> acts) {
  ASSIGN_OR_RETURN(Cgroups cg, Layout(root, name, /*make=*/false));
  cg.acts_ = acts ? std::move(acts) : std::make_shared<LocalActs>(cg);
  RETURN_IF_ERROR(cg.acts_->MakeParents());
  return cg;
}

Result<std::shared_ptr<CgroupActs>> Cgroups::ActsOn(const std::string& root, const std::string& name) {
  ASSIGN_OR_RETURN(Cgroups cg, Layout(root, name, /*make=*/false));
  return std::shared_ptr<CgroupActs>(std::make_shared<LocalActs>(std::move(cg)));
}

Result<Cgroups> Cgroups::Layout(const std::string& root, const std::string& name, bool make) {
  Cgroups cg;
  cg.root_ = root;
  cg.name_ = name;
  if (Exists(root + "/cgroup.controllers")) {
    cg.v2_ = true;
    const std::string parent = root + "/" + name;
    if (!make) {
      cg.hierarchies_.push_back({.controller = "", .parent = parent});
      return cg;
    }
    RETURN_IF_ERROR(MakeDirs(parent, 0755));
    ASSIGN_OR_RETURN(std::string available, ReadFileToString(root + "/cgroup.controllers", 4096));
    for (const char* c : {"cpu", "memory", "pids"}) {
      if (available.find(c) == std::string::npos) {
        return Unavailable(std::string("cgroup v2 controller ") + c + " is not available at " +
                           root);
      }
    }
    // Controllers must be enabled at every level above the sandbox cgroups.
    RETURN_IF_ERROR(WriteControl(root + "/cgroup.subtree_control", "+cpu +memory +pids"));
    RETURN_IF_ERROR(WriteControl(parent + "/cgroup.subtree_control", "+cpu +memory +pids"));
    cg.hierarchies_.push_back({.controller = "", .parent = parent});
    return cg;
  }

  std::vector<dev_t> seen;
  for (const V1Hierarchy& h : kV1Hierarchies) {
    const std::string mount = root + "/" + h.dir;
    struct statfs fs;
    struct stat st;
    bool is_cgroup = ::statfs(mount.c_str(), &fs) == 0 && ::stat(mount.c_str(), &st) == 0 &&
                     (fs.f_type == CGROUP_SUPER_MAGIC || fs.f_type == CGROUP2_SUPER_MAGIC);
    if (!is_cgroup) {
      if (h.required) return Unavailable("cgroup v1 hierarchy " + mount + " is not mounted");
      continue;
    }
    // Co-mounted controllers ("cpu,cpuacct" with cpu and cpuacct symlinks) share a
    // superblock; join each hierarchy once.
    if (std::find(seen.begin(), seen.end(), st.st_dev) != seen.end()) continue;
    seen.push_back(st.st_dev);
    const std::string parent = mount + "/" + name;
    Hierarchy hier{.controller = h.dir, .parent = parent, .cpuset = std::string(h.dir) == "cpuset"};
    if (!make) {
      cg.hierarchies_.push_back(std::move(hier));
      continue;
    }
    RETURN_IF_ERROR(MakeDirs(parent, 0755));
    if (hier.cpuset) {
      // A new cpuset starts with no cpus or mems and refuses tasks until given some.
      for (const char* f : {"cpuset.cpus", "cpuset.mems"}) {
        ASSIGN_OR_RETURN(std::string mine, ReadFileToString(parent + "/" + f, 4096));
        if (!Trim(mine).empty()) continue;
        ASSIGN_OR_RETURN(std::string from_root, ReadFileToString(mount + "/" + f, 4096));
        RETURN_IF_ERROR(WriteControl(parent + "/" + f, Trim(from_root)));
      }
    }
    if (hier.controller == "memory") {
      // Old kernels default to flat accounting; newer ones ignore this (always 1).
      (void)WriteControl(parent + "/memory.use_hierarchy", "1", true);
    }
    cg.hierarchies_.push_back(std::move(hier));
  }
  return cg;
}

const Cgroups::Hierarchy* Cgroups::Find(const std::string& controller) const {
  if (v2_) return &hierarchies_.front();
  for (const Hierarchy& h : hierarchies_) {
    if (h.controller == controller) return &h;
  }
  return nullptr;
}

std::string Cgroups::PathFor(const std::string& id, const std::string& controller) const {
  const Hierarchy* h = Find(controller);
  return h ? Dir(*h, id) : std::string();
}

Status Cgroups::Create(const std::string& id, const Limits& limits) const { return acts_->Create(id, limits); }

Status Cgroups::UpdateLimits(const std::string& id, const Limits& limits) const {
  return acts_->UpdateLimits(id, limits);
}

Status Cgroups::Attach(const std::string& id, pid_t pid, int pidfd) const { return acts_->Attach(id, pid, pidfd); }

Status Cgroups::Freeze(const std::string& id) const {
  const Hierarchy* h = Find("freezer");
  if (h == nullptr) return Unavailable("no freezer hierarchy");
  const std::string dir = Dir(*h, id);
  if (!Exists(dir)) return NotFound("sandbox " + id + ": no cgroup");
  const int64_t deadline = MonoNowNs() + kFreezeTimeoutNs;
  if (v2_) {
    RETURN_IF_ERROR(acts_->SetFrozen(id, true));
    for (;;) {
      ASSIGN_OR_RETURN(bool frozen, EventIs(dir, "frozen", '1'));
      if (frozen) return Status::Ok();
      if (MonoNowNs() > deadline) {
        (void)acts_->SetFrozen(id, false);  // never leave it half frozen
        return DeadlineExceeded("freeze " + dir + ": still freezing after 5 s (tasks busy in the kernel); thawed again");
      }
      SleepMs(1);
    }
  }
  // v1: FREEZING until every task has stopped; writing FROZEN again retries stragglers.
  for (;;) {
    RETURN_IF_ERROR(acts_->SetFrozen(id, true));
    ASSIGN_OR_RETURN(std::string state, ReadFileToString(dir + "/freezer.state", 64));
    if (Trim(state) == "FROZEN") return Status::Ok();
    if (MonoNowNs() > deadline) {
      // Tasks in uninterruptible sleep (a sandbox hammering its disk quota makes btrfs
      // commit) keep v1 in FREEZING; the tasks already stopped would stay stopped while the
      // sandbox is still called running. Thaw them all and say so.
      (void)acts_->SetFrozen(id, false);
      return DeadlineExceeded("freeze " + dir + ": still " + Trim(state) +
                              " after 5 s (tasks busy in the kernel); thawed again");
    }
    SleepMs(1);
  }
}

Status Cgroups::Thaw(const std::string& id) const { return acts_->SetFrozen(id, false); }

Result<std::vector<pid_t>> Cgroups::Procs(const std::string& id) const {
  std::vector<pid_t> pids;
  for (const Hierarchy& h : hierarchies_) {
    const std::string path = Dir(h, id) + "/cgroup.procs";
    Result<std::string> text = ReadFileToString(path, 1 << 20);
    if (!text.ok()) {
      if (!Exists(Dir(h, id))) continue;
      return text.status();
    }
    size_t pos = 0;
    while (pos < text->size()) {
      size_t end = text->find('\n', pos);
      if (end == std::string::npos) end = text->size();
      pid_t pid = 0;
      auto [ptr, ec] = std::from_chars(text->data() + pos, text->data() + end, pid);
      if (ec != std::errc() || ptr != text->data() + end) return Internal("bad line in " + path);
      pids.push_back(pid);
      pos = end + 1;
    }
  }
  std::sort(pids.begin(), pids.end());
  pids.erase(std::unique(pids.begin(), pids.end()), pids.end());
  return pids;
}

Status Cgroups::KillAll(const std::string& id) const {
  const int64_t deadline = MonoNowNs() + kKillTimeoutNs;
  if (v2_) {
    const std::string dir = Dir(hierarchies_.front(), id);
    if (!Exists(dir)) return Status::Ok();
    if (Exists(dir + "/cgroup.kill")) {
      RETURN_IF_ERROR(acts_->Kill(id));
      for (;;) {
        ASSIGN_OR_RETURN(bool empty, EventIs(dir, "populated", '0'));
        if (empty) return Status::Ok();
        if (MonoNowNs() > deadline) return DeadlineExceeded("kill " + dir + ": still populated");
        SleepMs(1);
      }
    }
  }
  // v1 (or v2 without cgroup.kill): freeze so the task list cannot change and no pid in
  // it can exit and be reused, SIGKILL the list, thaw so the kills are delivered. Then
  // repeat until empty in case freezing was incomplete.
  {
    ASSIGN_OR_RETURN(std::vector<pid_t> pids, Procs(id));
    if (pids.empty()) return Status::Ok();  // the common case: init was killed and reaped
  }
  const Hierarchy* freezer = Find("freezer");
  bool frozen = freezer != nullptr && Exists(Dir(*freezer, id)) && Freeze(id).ok();
  for (bool first = true;; first = false) {
    ASSIGN_OR_RETURN(std::vector<pid_t> pids, Procs(id));
    if (pids.empty()) break;
    RETURN_IF_ERROR(acts_->Kill(id));
    if (first && frozen) (void)Thaw(id);
    if (MonoNowNs() > deadline) {
      return DeadlineExceeded("sandbox " + id + ": " + std::to_string(pids.size()) +
                              " processes survive SIGKILL");
    }
    SleepMs(1);
  }
  if (frozen) (void)Thaw(id);
  return Status::Ok();
}

Status Cgroups::Remove(const std::string& id) const {
  const int64_t deadline = MonoNowNs() + kRmdirTimeoutNs;
  for (;;) {
    Status st = acts_->Remove(id);
    if (st.ok() || st.code() != StatusCode::kUnavailable || MonoNowNs() > deadline) return st;
    SleepMs(1);
  }
}

Status Cgroups::RemoveParents() const { return acts_->RemoveParents(); }

Status Cgroups::RemoveParentsHere() const {
  Status first = Status::Ok();
  for (const Hierarchy& h : hierarchies_) {
    if (::rmdir(h.parent.c_str()) == 0 || errno == ENOENT || errno == EBUSY || errno == ENOTEMPTY) continue;
    if (first.ok()) first = ErrnoStatus("rmdir", h.parent, errno);
  }
  return first;
}

Result<std::set<std::string>> Cgroups::List() const {
  std::set<std::string> ids;
  for (const Hierarchy& h : hierarchies_) {
    DIR* d = ::opendir(h.parent.c_str());
    if (d == nullptr) {
      if (errno == ENOENT) continue;
      return ErrnoStatus("opendir", h.parent, errno);
    }
    while (dirent* e = ::readdir(d)) {
      if (e->d_type == DT_DIR && e->d_name[0] != '.') ids.insert(e->d_name);
    }
    ::closedir(d);
  }
  return ids;
}

}  // namespace space::runtime::ns
