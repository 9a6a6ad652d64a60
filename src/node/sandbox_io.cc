#include "node/sandbox_io.h"

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/log.h"
#include "common/random.h"
#include "node/owned_sandbox.h"
#include "protocol/exec_request.h"

namespace space::node {
namespace {

constexpr int64_t kGuestAnswerMs = 15000;
constexpr size_t kMaxProcessesKept = 1024;  // finished ones beyond this are forgotten, oldest first

// Drops the oldest finished processes so a long-lived sandbox's table stays bounded.
void TrimProcesses(std::map<std::string, std::shared_ptr<Process>>* procs) {
  if (procs->size() < kMaxProcessesKept) return;
  std::shared_ptr<Process> oldest;
  for (auto& [pid, p] : *procs) {
    if (p->exited() && (!oldest || p->started_at_ms() < oldest->started_at_ms())) oldest = p;
  }
  if (oldest) procs->erase(oldest->id());
}

bool ValidTtySize(int n) { return n >= 1 && n <= static_cast<int>(guest::kMaxTtySize); }

}  // namespace

Result<std::shared_ptr<LiveSandbox>> SandboxIo::Running(const std::string& team, const std::string& id) {
  ASSIGN_OR_RETURN(store::Sandbox rec, GetOwned(store_, team, id));
  if (rec.state != store::SandboxState::kRunning) {
    return Conflict("sandbox " + id + " is " + std::string(store::StateName(rec.state)) +
                    "; this call needs a running sandbox");
  }
  std::shared_ptr<LiveSandbox> live = live_->Find(id);
  if (!live || !live->guest->alive()) return Unavailable("sandbox " + id + " is not reachable on this node right now");
  return live;
}

void SandboxIo::RecordCommand(const std::string& sandbox, const Process& p) {
  store::CommandRecord c;
  c.pid = p.id();
  c.sandbox = sandbox;
  c.cmd = p.spec().cmd;
  c.user = p.spec().user;
  c.cwd = p.spec().cwd;
  c.started_at_ms = p.started_at_ms();
  c.finished_at_ms = p.finished_at_ms();
  if (auto e = p.exit_info()) {
    c.exit_code = e->exit_code;
    if (e->signal) c.signal = SignalName(*e->signal);
  }
  c.stdout_bytes = p.stdout_bytes();
  c.stderr_bytes = p.stderr_bytes();
  if (Status st = store_->PutCommand(c); !st.ok()) LogError("node", st.ToString());
}

Result<std::shared_ptr<Process>> SandboxIo::Start(const std::string& team, const std::string& id, ProcessSpec spec) {
  ASSIGN_OR_RETURN(std::shared_ptr<LiveSandbox> live, Running(team, id));
  if (on_activity_) on_activity_();
  guest::ExecRequest req;
  req.cmd = spec.cmd;
  req.env.assign(live->base_env.begin(), live->base_env.end());     // a warm-pool sandbox's create env
  req.env.insert(req.env.end(), spec.env.begin(), spec.env.end());  // later entries win
  if (!spec.cwd.empty()) req.cwd = spec.cwd;
  req.user = spec.user;
  req.timeout_ms = spec.timeout_s > 0 ? static_cast<uint64_t>(spec.timeout_s) * 1000 : 0;
  req.keep_stdin = spec.keep_stdin_open || !spec.stdin_data.empty();
  if (spec.tty) {
    if (!ValidTtySize(spec.tty_cols) || !ValidTtySize(spec.tty_rows)) {
      return InvalidArgument("tty size must be 1.." + std::to_string(guest::kMaxTtySize) + " columns and rows");
    }
    req.tty = true;
    req.cols = static_cast<uint16_t>(spec.tty_cols);
    req.rows = static_cast<uint16_t>(spec.tty_rows);
  }
  std::string payload = guest::EncodeExecRequest(req);
  if (payload.size() > guest::kMaxPayload) return PayloadTooLarge("command and environment exceed 1 MiB");

  auto proc = std::make_shared<Process>(NewId("proc"), std::move(spec), WallNowMs());
  proc->set_on_exit([this, id](const Process& p) { RecordCommand(id, p); });
  // Runs on this client's reader thread, which the client joins before it goes away. Set
  // before the stream opens: a hostile guest may send frames on it at once.
  proc->set_on_truncated([client = live->guest.get(), p = proc.get()] {
    (void)client->Send(guest::FrameType::kDropOutput, p->stream(), "");
  });
  RecordCommand(id, *proc);
  audit_->Record(team, id, "exec", "exec",
                 {{"pid", proc->id()}, {"cmd", proc->spec().cmd}, {"user", proc->spec().user}});
  uint32_t stream = live->guest->OpenStream(proc);
  proc->set_stream(stream);
  {
    std::lock_guard<std::mutex> lock(live->mu);
    TrimProcesses(&live->processes);
    live->processes[proc->id()] = proc;
  }
  Status st = live->guest->Send(guest::FrameType::kExecStart, stream, payload);
  if (st.ok()) st = proc->WaitStarted(kGuestAnswerMs);
  if (!st.ok()) {
    live->guest->CloseStream(stream);
    {
      std::lock_guard<std::mutex> lock(live->mu);
      live->processes.erase(proc->id());
    }
    RecordCommand(id, *proc);
    return st;
  }
  if (!proc->spec().stdin_data.empty()) {
    std::string_view data = proc->spec().stdin_data;
    for (size_t off = 0; off < data.size() && st.ok(); off += guest::kChunkSize) {
      st = live->guest->Send(guest::FrameType::kStdin, stream, data.substr(off, guest::kChunkSize));
    }
    if (st.ok() && !proc->spec().keep_stdin_open) st = live->guest->Send(guest::FrameType::kStdin, stream, "");
    if (!st.ok()) LogWarn("node", "stdin for " + proc->id() + ": " + st.ToString());
  }
  return proc;
}

Result<std::shared_ptr<Process>> SandboxIo::Get(const std::string& team, const std::string& id,
                                                const std::string& pid) {
  RETURN_IF_ERROR(GetOwned(store_, team, id).status());
  if (std::shared_ptr<LiveSandbox> live = live_->Find(id)) {
    std::lock_guard<std::mutex> lock(live->mu);
    auto p = live->processes.find(pid);
    if (p != live->processes.end()) return p->second;
  }
  return NotFound("process " + pid + " not found in sandbox " + id);
}

Result<std::vector<std::shared_ptr<Process>>> SandboxIo::List(const std::string& team, const std::string& id) {
  RETURN_IF_ERROR(GetOwned(store_, team, id).status());
  std::vector<std::shared_ptr<Process>> out;
  std::shared_ptr<LiveSandbox> live = live_->Find(id);
  if (!live) return out;
  std::lock_guard<std::mutex> lock(live->mu);
  for (auto& [pid, p] : live->processes) out.push_back(p);
  return out;
}

Status SandboxIo::WriteStdin(const std::string& team, const std::string& id, const std::string& pid,
                             std::string_view data) {
  ASSIGN_OR_RETURN(std::shared_ptr<LiveSandbox> live, Running(team, id));
  ASSIGN_OR_RETURN(std::shared_ptr<Process> proc, Get(team, id, pid));
  if (proc->exited()) return Conflict("process " + pid + " has exited");
  if (data.empty()) return live->guest->Send(guest::FrameType::kStdin, proc->stream(), "");
  for (size_t off = 0; off < data.size(); off += guest::kChunkSize) {
    RETURN_IF_ERROR(live->guest->Send(guest::FrameType::kStdin, proc->stream(), data.substr(off, guest::kChunkSize)));
  }
  return Status::Ok();
}

Status SandboxIo::Signal(const std::string& team, const std::string& id, const std::string& pid, int sig) {
  ASSIGN_OR_RETURN(std::shared_ptr<LiveSandbox> live, Running(team, id));
  ASSIGN_OR_RETURN(std::shared_ptr<Process> proc, Get(team, id, pid));
  if (proc->exited()) return Conflict("process " + pid + " has exited");
  audit_->Record(team, id, "exec", "signal", {{"pid", pid}, {"signal", SignalName(sig)}});
  return live->guest->Send(guest::FrameType::kSignal, proc->stream(), nlohmann::json{{"signal", sig}}.dump());
}

Status SandboxIo::Resize(const std::string& team, const std::string& id, const std::string& pid, int cols, int rows) {
  ASSIGN_OR_RETURN(std::shared_ptr<LiveSandbox> live, Running(team, id));
  ASSIGN_OR_RETURN(std::shared_ptr<Process> proc, Get(team, id, pid));
  if (proc->exited()) return Conflict("process " + pid + " has exited");
  if (!proc->spec().tty) return InvalidArgument("process " + pid + " has no terminal to resize");
  if (!ValidTtySize(cols) || !ValidTtySize(rows)) {
    return InvalidArgument("tty size must be 1.." + std::to_string(guest::kMaxTtySize) + " columns and rows");
  }
  return live->guest->Send(guest::FrameType::kResize, proc->stream(),
                           nlohmann::json{{"cols", cols}, {"rows", rows}}.dump());
}

Result<std::vector<store::CommandRecord>> SandboxIo::Commands(const std::string& team, const std::string& id) {
  RETURN_IF_ERROR(GetOwned(store_, team, id).status());
  return store_->ListCommands(id);
}

Result<std::string> SandboxIo::ReadFile(const std::string& team, const std::string& id, const std::string& path) {
  ASSIGN_OR_RETURN(std::shared_ptr<LiveSandbox> live, Running(team, id));
  return GuestReadFile(live.get(), path);
}

Status SandboxIo::WriteFile(const std::string& team, const std::string& id, const std::string& path, int mode,
                            std::string_view data, const std::string& owner) {
  ASSIGN_OR_RETURN(std::shared_ptr<LiveSandbox> live, Running(team, id));
  return GuestWriteFile(live.get(), path, mode, data, owner);
}

Result<FileEntry> SandboxIo::Stat(const std::string& team, const std::string& id, const std::string& path) {
  ASSIGN_OR_RETURN(std::shared_ptr<LiveSandbox> live, Running(team, id));
  return GuestStat(live.get(), path);
}

Result<std::vector<FileEntry>> SandboxIo::ListDir(const std::string& team, const std::string& id,
                                                  const std::string& path, int depth) {
  ASSIGN_OR_RETURN(std::shared_ptr<LiveSandbox> live, Running(team, id));
  return GuestList(live.get(), path, depth);
}

Status SandboxIo::MakeDir(const std::string& team, const std::string& id, const std::string& path,
                          const std::string& owner) {
  ASSIGN_OR_RETURN(std::shared_ptr<LiveSandbox> live, Running(team, id));
  return GuestMakeDir(live.get(), path, owner);
}

Status SandboxIo::Move(const std::string& team, const std::string& id, const std::string& from, const std::string& to) {
  ASSIGN_OR_RETURN(std::shared_ptr<LiveSandbox> live, Running(team, id));
  return GuestMove(live.get(), from, to);
}

Status SandboxIo::Remove(const std::string& team, const std::string& id, const std::string& path, bool recursive) {
  ASSIGN_OR_RETURN(std::shared_ptr<LiveSandbox> live, Running(team, id));
  return GuestRemove(live.get(), path, recursive);
}

Result<std::shared_ptr<DirWatchStream>> SandboxIo::Watch(const std::string& team, const std::string& id,
                                                         const std::string& path, bool recursive) {
  ASSIGN_OR_RETURN(std::shared_ptr<LiveSandbox> live, Running(team, id));
  // The closer holds the sandbox weakly: a watch outliving its sandbox must not keep it.
  std::weak_ptr<LiveSandbox> weak = live;
  auto stream_id = std::make_shared<std::atomic<uint32_t>>(0);
  auto watch = std::make_shared<DirWatchStream>([weak, stream_id] {
    std::shared_ptr<LiveSandbox> l = weak.lock();
    uint32_t s = stream_id->load();
    if (!l || s == 0) return;
    (void)l->guest->Send(guest::FrameType::kWatchStop, s, "");  // a dead channel drops it anyway
    l->guest->CloseStream(s);
  });
  uint32_t stream = live->guest->OpenStream(watch);
  stream_id->store(stream);
  Status st = live->guest->Send(guest::FrameType::kWatchStart, stream,
                                nlohmann::json{{"path", path}, {"recursive", recursive}}.dump());
  if (st.ok()) st = watch->WaitStarted(kGuestAnswerMs);
  if (!st.ok()) {
    watch->Close();
    return st;
  }
  return watch;
}

}  // namespace space::node
