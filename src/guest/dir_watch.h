// DirWatch: one kWatchStart stream's inotify watch on a directory (and, when recursive, on
// every directory below it, including ones created later), turned into the protocol's
// change events.
//
// Owned by the event loop, which polls fd() and calls ReadEvents when it is readable and
// TakeBatch when the channel can take more. The inotify instance is the DirWatch's own, so
// destroying it drops every kernel watch at once. Bounded: the number of watched
// directories over all DirWatches of a daemon is capped by a shared WatchBudget, and queued
// events by kMaxWatchQueue; what is lost either way is reported as overflow. Paths come from
// the sandbox and are used as they are (spaced runs pivoted into the sandbox root).
// Thread-compatible.
#pragma once

#include <cstddef>
#include <deque>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>

#include "common/result.h"
#include "common/unique_fd.h"

namespace space::guest {

// Directories watched by all DirWatches of one daemon, against a limit.
struct WatchBudget {
  size_t used = 0;
  size_t limit = 0;
};

struct WatchEvent {
  std::string name;  // relative to the watched directory
  const char* type;  // "create", "write", "remove", "rename", "chmod"
};

class DirWatch {
 public:
  // Watches `path` (an absolute directory). kNotFound when it does not exist,
  // kInvalidArgument when it is not a directory, kResourceExhausted when a recursive watch
  // needs more directories than `budget` has left. `budget` must outlive the DirWatch.
  static Result<std::unique_ptr<DirWatch>> Create(const std::string& path, bool recursive, WatchBudget* budget);
  ~DirWatch();
  DirWatch(const DirWatch&) = delete;
  DirWatch& operator=(const DirWatch&) = delete;

  // The inotify fd (non-blocking): readable when ReadEvents has something to do.
  int fd() const { return fd_.get(); }
  // Reads what the kernel queued and turns it into events (bounded work per call).
  void ReadEvents();
  // The next kWatchEvents payload ({"events": [...] up to kMaxWatchBatch, "overflow"}), or
  // an empty object when there is nothing to report.
  nlohmann::json TakeBatch();
  bool has_pending() const { return !queue_.empty() || overflow_; }
  // The watched directory itself was removed or moved away: nothing more will come.
  bool root_gone() const { return root_gone_; }
  const std::string& path() const { return root_; }
  size_t watched_dirs() const { return dirs_.size(); }

 private:
  DirWatch(UniqueFd fd, std::string root, bool recursive, WatchBudget* budget);
  // Watches `rel` and (recursive) the directories below it. With `strict`, running out of
  // budget is an error; otherwise it sets overflow_.
  Status AddTree(const std::string& rel, bool strict);
  // Forgets the watches on `rel` and below (a directory that moved away).
  void RemoveTree(const std::string& rel);
  void Push(std::string name, const char* type);

  UniqueFd fd_;
  const std::string root_;  // no trailing slash unless "/"
  const bool recursive_;
  WatchBudget* const budget_;
  int root_wd_ = -1;
  std::unordered_map<int, std::string> dirs_;  // wd -> path relative to root_ ("" = root_)
  std::deque<WatchEvent> queue_;
  bool overflow_ = false;
  bool root_gone_ = false;
};

}  // namespace space::guest
