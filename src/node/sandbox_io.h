// SandboxIo: processes and files of running sandboxes, through each sandbox's guest. Commands
// are started, fed, signalled and resized here, and recorded (the command log and the audit);
// files are read, written, listed and watched by the guest inside the sandbox's own root.
//
// Owned by the Node; borrows the store, the live table and the audit log. Every call takes
// (team, id) and answers not_found for another team's sandbox. Thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "node/audit_log.h"
#include "node/dir_watch_stream.h"
#include "node/guest_files.h"
#include "node/live_sandboxes.h"
#include "node/process.h"
#include "store/store.h"

namespace space::node {

class SandboxIo {
 public:
  // `on_activity` runs at each command start: warm-pool refills wait for a quiet moment.
  SandboxIo(store::Store* store, LiveSandboxes* live, AuditLog* audit, std::function<void()> on_activity)
      : store_(store), live_(live), audit_(audit), on_activity_(std::move(on_activity)) {}

  // Processes. Valid while running, but Get/List, which answer for any state.
  Result<std::shared_ptr<Process>> Start(const std::string& team, const std::string& id, ProcessSpec spec);
  Result<std::shared_ptr<Process>> Get(const std::string& team, const std::string& id, const std::string& pid);
  Result<std::vector<std::shared_ptr<Process>>> List(const std::string& team, const std::string& id);
  Status WriteStdin(const std::string& team, const std::string& id, const std::string& pid, std::string_view data);
  Status Signal(const std::string& team, const std::string& id, const std::string& pid, int sig);
  // A tty process's new window size (1..4096 each).
  Status Resize(const std::string& team, const std::string& id, const std::string& pid, int cols, int rows);
  Result<std::vector<store::CommandRecord>> Commands(const std::string& team, const std::string& id);

  // Files. Valid while running.
  Result<std::string> ReadFile(const std::string& team, const std::string& id, const std::string& path);
  Status WriteFile(const std::string& team, const std::string& id, const std::string& path, int mode,
                   std::string_view data, const std::string& owner = "");
  Result<FileEntry> Stat(const std::string& team, const std::string& id, const std::string& path);
  Result<std::vector<FileEntry>> ListDir(const std::string& team, const std::string& id, const std::string& path,
                                         int depth);
  Status MakeDir(const std::string& team, const std::string& id, const std::string& path,
                 const std::string& owner = "");
  Status Move(const std::string& team, const std::string& id, const std::string& from, const std::string& to);
  Status Remove(const std::string& team, const std::string& id, const std::string& path, bool recursive);
  // Watches a directory (and, `recursive`, everything below it) with the guest's inotify;
  // returns once the watch is in place. The caller takes changes and must Close() it.
  Result<std::shared_ptr<DirWatchStream>> Watch(const std::string& team, const std::string& id, const std::string& path,
                                                bool recursive);

 private:
  // The live entry of a running sandbox of `team` whose guest answers.
  Result<std::shared_ptr<LiveSandbox>> Running(const std::string& team, const std::string& id);
  void RecordCommand(const std::string& sandbox, const Process& p);

  store::Store* const store_;
  LiveSandboxes* const live_;
  AuditLog* const audit_;
  const std::function<void()> on_activity_;
};

}  // namespace space::node
