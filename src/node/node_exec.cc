// Processes and files of running sandboxes: everything goes through the sandbox's guest, which
// resolves paths inside the sandbox's own root; the node never touches sandbox files on the host.
#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/log.h"
#include "common/random.h"
#include "node/file_transfer.h"
#include "node/live.h"
#include "node/node.h"

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

}  // namespace

Result<std::shared_ptr<Node::Live>> Node::RunningLive(const std::string& team, const std::string& id) {
  ASSIGN_OR_RETURN(store::SandboxRecord rec, Get(team, id));
  if (rec.state != "running") {
    return Conflict("sandbox " + id + " is " + rec.state + "; this call needs a running sandbox");
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(id);
  if (it == live_.end() || !it->second->guest->alive()) {
    return Unavailable("sandbox " + id + " is not reachable on this node right now");
  }
  return it->second;
}

void Node::RecordCommand(const std::string& sandbox, const Process& p) {
  store::CommandRecord c;
  c.pid = p.id();
  c.sandbox = sandbox;
  c.cmd_json = nlohmann::json(p.spec().cmd).dump();
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

Result<std::shared_ptr<Process>> Node::StartProcess(const std::string& team, const std::string& id,
                                                    ProcessSpec spec) {
  ASSIGN_OR_RETURN(std::shared_ptr<Live> live, RunningLive(team, id));
  last_activity_mono_ns_ = MonoNowNs();  // warm-pool refills wait for a quiet moment
  nlohmann::json req = {{"cmd", spec.cmd}, {"user", spec.user}, {"timeout_ms", spec.timeout_s * 1000},
                        {"stdin", spec.keep_stdin_open || !spec.stdin_data.empty()}};
  nlohmann::json env = nlohmann::json::object();
  for (const auto& [k, v] : live->base_env) env[k] = v;  // a warm-pool sandbox's create env
  for (const auto& [k, v] : spec.env) env[k] = v;
  req["env"] = env;
  if (!spec.cwd.empty()) req["cwd"] = spec.cwd;
  if (spec.tty) {
    auto valid = [](int n) { return n >= 1 && n <= static_cast<int>(guest::kMaxTtySize); };
    if (!valid(spec.tty_cols) || !valid(spec.tty_rows)) {
      return InvalidArgument("tty size must be 1.." + std::to_string(guest::kMaxTtySize) + " columns and rows");
    }
    req["tty"] = true;
    req["cols"] = spec.tty_cols;
    req["rows"] = spec.tty_rows;
  }
  std::string payload = req.dump();
  if (payload.size() > guest::kMaxPayload) return PayloadTooLarge("command and environment exceed 1 MiB");

  auto proc = std::make_shared<Process>(NewId("proc"), std::move(spec), WallNowMs());
  proc->set_on_exit([this, id](const Process& p) { RecordCommand(id, p); });
  // Runs on this client's reader thread, which the client joins before it goes away. Set
  // before the stream opens: a hostile guest may send frames on it at once.
  proc->set_on_truncated([client = live->guest.get(), p = proc.get()] {
    (void)client->Send(guest::FrameType::kDropOutput, p->stream(), "");
  });
  RecordCommand(id, *proc);
  Audit(team, id, "exec", "exec", {{"pid", proc->id()}, {"cmd", proc->spec().cmd}, {"user", proc->spec().user}});
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
    std::lock_guard<std::mutex> lock(live->mu);
    live->processes.erase(proc->id());
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

Result<std::shared_ptr<Process>> Node::GetProcess(const std::string& team, const std::string& id,
                                                  const std::string& pid) {
  ASSIGN_OR_RETURN(store::SandboxRecord rec, Get(team, id));
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(id);
  if (it != live_.end()) {
    std::lock_guard<std::mutex> plock(it->second->mu);
    auto p = it->second->processes.find(pid);
    if (p != it->second->processes.end()) return p->second;
  }
  return NotFound("process " + pid + " not found in sandbox " + id);
}

Result<std::vector<std::shared_ptr<Process>>> Node::ListProcesses(const std::string& team, const std::string& id) {
  ASSIGN_OR_RETURN(store::SandboxRecord rec, Get(team, id));
  std::vector<std::shared_ptr<Process>> out;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(id);
  if (it == live_.end()) return out;
  std::lock_guard<std::mutex> plock(it->second->mu);
  for (auto& [pid, p] : it->second->processes) out.push_back(p);
  return out;
}

Status Node::WriteStdin(const std::string& team, const std::string& id, const std::string& pid,
                        std::string_view data) {
  ASSIGN_OR_RETURN(std::shared_ptr<Live> live, RunningLive(team, id));
  ASSIGN_OR_RETURN(std::shared_ptr<Process> proc, GetProcess(team, id, pid));
  if (proc->exited()) return Conflict("process " + pid + " has exited");
  if (data.empty()) return live->guest->Send(guest::FrameType::kStdin, proc->stream(), "");
  for (size_t off = 0; off < data.size(); off += guest::kChunkSize) {
    RETURN_IF_ERROR(live->guest->Send(guest::FrameType::kStdin, proc->stream(), data.substr(off, guest::kChunkSize)));
  }
  return Status::Ok();
}

Status Node::SignalProcess(const std::string& team, const std::string& id, const std::string& pid, int sig) {
  ASSIGN_OR_RETURN(std::shared_ptr<Live> live, RunningLive(team, id));
  ASSIGN_OR_RETURN(std::shared_ptr<Process> proc, GetProcess(team, id, pid));
  if (proc->exited()) return Conflict("process " + pid + " has exited");
  Audit(team, id, "exec", "signal", {{"pid", pid}, {"signal", SignalName(sig)}});
  return live->guest->Send(guest::FrameType::kSignal, proc->stream(), nlohmann::json{{"signal", sig}}.dump());
}

Status Node::ResizeProcess(const std::string& team, const std::string& id, const std::string& pid, int cols,
                           int rows) {
  ASSIGN_OR_RETURN(std::shared_ptr<Live> live, RunningLive(team, id));
  ASSIGN_OR_RETURN(std::shared_ptr<Process> proc, GetProcess(team, id, pid));
  if (proc->exited()) return Conflict("process " + pid + " has exited");
  if (!proc->spec().tty) return InvalidArgument("process " + pid + " has no terminal to resize");
  auto valid = [](int n) { return n >= 1 && n <= static_cast<int>(guest::kMaxTtySize); };
  if (!valid(cols) || !valid(rows)) {
    return InvalidArgument("tty size must be 1.." + std::to_string(guest::kMaxTtySize) + " columns and rows");
  }
  return live->guest->Send(guest::FrameType::kResize, proc->stream(),
                           nlohmann::json{{"cols", cols}, {"rows", rows}}.dump());
}

Result<std::shared_ptr<DirWatchStream>> Node::WatchDirectory(const std::string& team, const std::string& id,
                                                             const std::string& path, bool recursive) {
  ASSIGN_OR_RETURN(std::shared_ptr<Live> live, RunningLive(team, id));
  // The closer holds the Live weakly: a watch outliving its sandbox must not keep it.
  std::weak_ptr<Live> weak = live;
  auto stream_id = std::make_shared<std::atomic<uint32_t>>(0);
  auto watch = std::make_shared<DirWatchStream>([weak, stream_id] {
    std::shared_ptr<Live> l = weak.lock();
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

Result<std::vector<store::CommandRecord>> Node::Commands(const std::string& team, const std::string& id) {
  RETURN_IF_ERROR(Get(team, id).status());
  return store_->ListCommands(id);
}

Result<std::string> Node::ReadFile(const std::string& team, const std::string& id, const std::string& path) {
  ASSIGN_OR_RETURN(std::shared_ptr<Live> live, RunningLive(team, id));
  return LiveReadFile(live.get(), path);
}

Result<std::string> Node::LiveReadFile(Live* live, const std::string& path) {
  auto t = std::make_shared<FileTransfer>(kMaxFileBytes);
  uint32_t stream = live->guest->OpenStream(t);
  Status st = live->guest->Send(guest::FrameType::kFileOp, stream, nlohmann::json{{"op", "read"}, {"path", path}}.dump());
  Result<std::string> body = st;
  if (st.ok()) {
    auto res = t->WaitResult(kGuestAnswerMs);
    body = res.ok() ? t->WaitBody(kGuestAnswerMs * 8) : Result<std::string>(res.status());
  }
  live->guest->CloseStream(stream);
  return body;
}

Result<nlohmann::json> Node::WriteFile(const std::string& team, const std::string& id, const std::string& path,
                                       int mode, std::string_view data, const std::string& owner) {
  ASSIGN_OR_RETURN(std::shared_ptr<Live> live, RunningLive(team, id));
  return LiveWriteFile(live.get(), path, mode, data, owner);
}

Result<nlohmann::json> Node::LiveWriteFile(Live* live, const std::string& path, int mode, std::string_view data,
                                           const std::string& owner) {
  auto t = std::make_shared<FileTransfer>(0);
  uint32_t stream = live->guest->OpenStream(t);
  auto send_all = [&]() -> Status {
    nlohmann::json op = {{"op", "write"}, {"path", path}, {"mode", mode}};
    if (!owner.empty()) op["owner"] = owner;
    RETURN_IF_ERROR(live->guest->Send(guest::FrameType::kFileOp, stream, op.dump()));
    for (size_t off = 0; off < data.size(); off += guest::kChunkSize) {
      RETURN_IF_ERROR(live->guest->Send(guest::FrameType::kFileData, stream, data.substr(off, guest::kChunkSize)));
    }
    return live->guest->Send(guest::FrameType::kFileData, stream, "");
  };
  Status st = send_all();
  Result<nlohmann::json> res = st;
  if (st.ok()) res = t->WaitResult(kGuestAnswerMs * 4);
  live->guest->CloseStream(stream);
  return res;
}

Result<nlohmann::json> Node::FileOp(const std::string& team, const std::string& id, const nlohmann::json& request) {
  ASSIGN_OR_RETURN(std::shared_ptr<Live> live, RunningLive(team, id));
  auto t = std::make_shared<FileTransfer>(0);
  uint32_t stream = live->guest->OpenStream(t);
  Status st = live->guest->Send(guest::FrameType::kFileOp, stream, request.dump());
  Result<nlohmann::json> res = st;
  if (st.ok()) res = t->WaitResult(kGuestAnswerMs * 4);
  live->guest->CloseStream(stream);
  return res;
}

}  // namespace space::node
