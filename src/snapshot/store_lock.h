// StoreLock: exports and restores hold a snapshot store shared, garbage collection holds it
// exclusive, so GC never sees an export's objects before its manifest lands. The lock is
// flock(2) on <store>/.lock, taken on a fresh open file each time, so it holds between threads
// of one node and between nodes that share the store directory (a fleet on one filesystem;
// Linux NFS clients map flock to byte-range locks the server arbitrates).
#pragma once

#include <string>

#include "common/result.h"
#include "common/unique_fd.h"

namespace space::snapshot {

class StoreLock {
 public:
  // Block until the lock is held; the lock is released when the object is destroyed.
  static Result<StoreLock> Shared(const std::string& store_dir);
  static Result<StoreLock> Exclusive(const std::string& store_dir);

 private:
  explicit StoreLock(UniqueFd fd) : fd_(std::move(fd)) {}
  static Result<StoreLock> Take(const std::string& store_dir, int operation);

  UniqueFd fd_;
};

}  // namespace space::snapshot
