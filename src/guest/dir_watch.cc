#include "guest/dir_watch.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "common/syscall.h"
#include "protocol/exec_request.h"
#include "protocol/protocol.h"

namespace space::guest {
namespace {

// IN_DONT_FOLLOW: a symlink is never watched through. IN_EXCL_UNLINK: no events for files
// already unlinked but still open.
constexpr uint32_t kMask = IN_CREATE | IN_MODIFY | IN_ATTRIB | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO |
                           IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW | IN_EXCL_UNLINK;
// inotify reads per ReadEvents call, so one busy directory cannot starve the loop.
constexpr int kMaxReadsPerCall = 16;

std::string Join(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  return dir + "/" + name;
}

}  // namespace

DirWatch::DirWatch(UniqueFd fd, std::string root, bool recursive, WatchBudget* budget)
    : fd_(std::move(fd)), root_(std::move(root)), recursive_(recursive), budget_(budget) {}

DirWatch::~DirWatch() { budget_->used -= dirs_.size(); }

Result<std::unique_ptr<DirWatch>> DirWatch::Create(const std::string& path, bool recursive, WatchBudget* budget) {
  if (path.empty() || path[0] != '/' || path.size() > kMaxPathBytes || path.find('\0') != std::string::npos) {
    return InvalidArgument("watch: path must be an absolute path");
  }
  std::string root = path;
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  UniqueFd fd(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
  if (!fd) return ErrnoStatus("inotify_init1", root, errno);
  std::unique_ptr<DirWatch> w(new DirWatch(std::move(fd), root, recursive, budget));
  RETURN_IF_ERROR(w->AddTree("", /*strict=*/true));
  return w;
}

Status DirWatch::AddTree(const std::string& rel, bool strict) {
  std::vector<std::string> todo = {rel};
  while (!todo.empty()) {
    std::string dir = std::move(todo.back());
    todo.pop_back();
    std::string full = dir.empty() ? root_ : (root_ == "/" ? "/" + dir : root_ + "/" + dir);
    if (full.size() > kMaxPathBytes) {
      overflow_ = true;
      continue;
    }
    if (budget_->used >= budget_->limit) {
      if (strict) {
        return ResourceExhausted("watch " + root_ + ": more than " + std::to_string(budget_->limit) +
                                 " directories watched in this sandbox");
      }
      overflow_ = true;
      return Status::Ok();
    }
    int wd = ::inotify_add_watch(fd_.get(), full.c_str(), kMask);
    if (wd < 0) {
      int err = errno;
      if (dir.empty()) {
        if (err == ENOTDIR) return InvalidArgument("watch " + root_ + ": not a directory");
        return ErrnoStatus("inotify_add_watch", full, err);
      }
      // Gone or replaced since it was listed: its removal is reported by its parent. Out of
      // kernel watches (ENOSPC): coverage is incomplete.
      if (err == ENOSPC || err == ENOMEM) overflow_ = true;
      continue;
    }
    if (dirs_.emplace(wd, dir).second) {
      ++budget_->used;
    } else {
      dirs_[wd] = dir;  // the same directory again (moved back): the newer name wins
    }
    if (dir.empty()) root_wd_ = wd;
    if (!recursive_) continue;
    UniqueFd dfd(::open(full.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!dfd) continue;
    DIR* d = ::fdopendir(dfd.get());
    if (d == nullptr) continue;
    (void)dfd.release();  // closedir owns it now
    while (dirent* e = ::readdir(d)) {
      if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
      bool is_dir = e->d_type == DT_DIR;
      if (e->d_type == DT_UNKNOWN) {
        struct stat st;
        is_dir = ::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
      }
      if (is_dir) todo.push_back(Join(dir, e->d_name));
    }
    ::closedir(d);
  }
  return Status::Ok();
}

void DirWatch::RemoveTree(const std::string& rel) {
  for (auto it = dirs_.begin(); it != dirs_.end();) {
    const std::string& p = it->second;
    bool below = p == rel || (p.size() > rel.size() && p.compare(0, rel.size(), rel) == 0 && p[rel.size()] == '/');
    if (below && it->first != root_wd_) {
      ::inotify_rm_watch(fd_.get(), it->first);
      --budget_->used;
      it = dirs_.erase(it);
    } else {
      ++it;
    }
  }
}

void DirWatch::Push(std::string name, const char* type) {
  if (queue_.size() >= kMaxWatchQueue) {
    overflow_ = true;
    return;
  }
  queue_.push_back({std::move(name), type});
}

void DirWatch::ReadEvents() {
  alignas(inotify_event) char buf[64 * 1024];
  for (int i = 0; i < kMaxReadsPerCall && !root_gone_; ++i) {
    ssize_t n = RetryEintr([&] { return ::read(fd_.get(), buf, sizeof buf); });
    if (n <= 0) return;  // EAGAIN: drained
    for (size_t off = 0; off + sizeof(inotify_event) <= static_cast<size_t>(n);) {
      const auto* ev = reinterpret_cast<const inotify_event*>(buf + off);
      off += sizeof(inotify_event) + ev->len;
      if (off > static_cast<size_t>(n)) break;  // the kernel never splits an event
      if (ev->mask & IN_Q_OVERFLOW) {
        overflow_ = true;
        continue;
      }
      auto dir = dirs_.find(ev->wd);
      if (dir == dirs_.end()) continue;  // a watch already forgotten
      if (ev->mask & IN_IGNORED) {
        if (ev->wd == root_wd_) root_gone_ = true;
        --budget_->used;
        dirs_.erase(dir);
        continue;
      }
      if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF)) {
        // A subdirectory's removal or move is reported by its parent.
        if (ev->wd == root_wd_) root_gone_ = true;
        continue;
      }
      std::string name(ev->name, ev->len > 0 ? ::strnlen(ev->name, ev->len) : 0);
      if (name.empty()) continue;
      std::string rel = Join(dir->second, name);
      bool is_dir = (ev->mask & IN_ISDIR) != 0;
      // fsnotify's (and so envd's) mapping: a move into the tree is a create, a move out a rename.
      if (ev->mask & (IN_CREATE | IN_MOVED_TO)) {
        Push(rel, "create");
        if (is_dir && recursive_) (void)AddTree(rel, /*strict=*/false);
      }
      if (ev->mask & IN_MODIFY) Push(rel, "write");
      if (ev->mask & IN_ATTRIB) Push(rel, "chmod");
      if (ev->mask & IN_DELETE) Push(rel, "remove");
      if (ev->mask & IN_MOVED_FROM) {
        Push(rel, "rename");
        if (is_dir && recursive_) RemoveTree(rel);
      }
    }
  }
}

nlohmann::json DirWatch::TakeBatch() {
  if (!has_pending()) return nlohmann::json::object();
  nlohmann::json events = nlohmann::json::array();
  while (!queue_.empty() && events.size() < kMaxWatchBatch) {
    events.push_back({{"name", std::move(queue_.front().name)}, {"type", queue_.front().type}});
    queue_.pop_front();
  }
  nlohmann::json out = {{"events", std::move(events)}, {"overflow", overflow_}};
  overflow_ = false;
  return out;
}

}  // namespace space::guest
