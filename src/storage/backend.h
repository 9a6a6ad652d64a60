// The two ways the pool stores trees: btrfs subvolumes/snapshots, or plain directories with
// overlayfs roots. Pool (pool.cc) owns one Backend and calls it with validated absolute
// paths; implementations keep no state beyond configuration and are thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/privileged_acts.h"
#include "common/result.h"

namespace space::storage {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string kind() const = 0;

  // An empty directory (btrfs: subvolume) to build a template in.
  virtual Status CreateScratch(const std::string& path) = 0;
  // Turns a finished scratch tree into the immutable template at `final_path`; the scratch
  // path is gone afterwards.
  virtual Status Seal(const std::string& scratch, const std::string& final_path) = 0;
  // Removes a scratch or template tree. OK if absent.
  virtual Status RemoveTree(const std::string& path) = 0;

  // Makes sandbox root `root_dir` from `template_path` (a template or, with snapshots, a
  // snapshot); returns the path the sandbox sees as /.
  virtual Result<std::string> CreateRoot(const std::string& template_path, const std::string& root_dir,
                                         uint64_t disk_limit_bytes) = 0;
  virtual Status DestroyRoot(const std::string& root_dir) = 0;
  // Changes the disk limit of an existing root (a warm-pool root handed out with another
  // disk_mb). Backends that enforce no limit accept and ignore it.
  virtual Status SetRootDiskLimit(const std::string& root_dir, uint64_t disk_limit_bytes) = 0;
  virtual std::string RootPath(const std::string& root_dir) const = 0;
  // Snapshots of roots. Only a backend with O(1) snapshots offers them; the others answer
  // SnapshotRoot with unavailable and the pool refuses every snapshot call up front.
  virtual bool has_snapshots() const = 0;
  // A read-only point-in-time copy of root `root_dir` at `snap_path`, created complete or not
  // at all. A root is cloned from a snapshot with CreateRoot(snap_path, ...), removed with
  // RemoveTree.
  virtual Status SnapshotRoot(const std::string& root_dir, const std::string& snap_path) = 0;
  // Bytes only tree `path` references (what deleting it would free), 0 when unknown.
  virtual uint64_t ExclusiveBytes(const std::string& path) = 0;

  // Called once at Open for each existing root (overlay: remount after a reboot).
  virtual Status RestoreRoot(const std::string& templates_dir, const std::string& root_dir) = 0;
};

std::unique_ptr<Backend> NewBtrfsBackend(bool quota_enabled, PrivilegedActs* acts);
std::unique_ptr<Backend> NewOverlayBackend();

}  // namespace space::storage
