// Exec, background processes and the command log.
#include <nlohmann/json.hpp>

#include "api/api.h"
#include "common/clock.h"
#include "common/ids.h"
#include "http/encoding.h"
#include "http/validate.h"

namespace space::api {
namespace {

constexpr int64_t kMaxExecTimeoutS = 86400;
constexpr int64_t kFollowSliceMs = 15000;  // SSE keep-alive comment interval

Result<node::ProcessSpec> ParseProcessSpec(const std::string& body, bool background) {
  ASSIGN_OR_RETURN(nlohmann::json b, ParseObject(body));
  RETURN_IF_ERROR(CheckKnownFields(b, {"cmd", "env", "cwd", "user", "timeout_s", "stdin", "stdin_b64", "tty",
                                       "snapshot_before"}));
  node::ProcessSpec s;
  if (!b.contains("cmd")) return InvalidArgument("field 'cmd' is required");
  ASSIGN_OR_RETURN(s.cmd, GetStringList(b, "cmd", 4096, 65536));
  if (s.cmd.empty() || s.cmd[0].empty()) return InvalidArgument("field 'cmd' must name a program");
  ASSIGN_OR_RETURN(auto env, GetStringMap(b, "env", 256, 256, 32768, IsEnvName));
  s.env.assign(env.begin(), env.end());
  ASSIGN_OR_RETURN(s.cwd, GetString(b, "cwd", "", 4096));
  if (!s.cwd.empty()) RETURN_IF_ERROR(CheckSandboxPath(s.cwd));
  ASSIGN_OR_RETURN(s.user, GetString(b, "user", "root", 32));
  if (!IsUserName(s.user)) return InvalidArgument("field 'user' is not a valid user name or uid");
  ASSIGN_OR_RETURN(s.timeout_s, GetInt(b, "timeout_s", 300, 1, kMaxExecTimeoutS));
  ASSIGN_OR_RETURN(std::string text, GetString(b, "stdin", "", 100u << 20));
  ASSIGN_OR_RETURN(std::string b64, GetString(b, "stdin_b64", "", 140u << 20));
  if (!text.empty() && !b64.empty()) return InvalidArgument("give 'stdin' or 'stdin_b64', not both");
  if (!b64.empty()) {
    ASSIGN_OR_RETURN(s.stdin_data, Base64Decode(b64));
  } else {
    s.stdin_data = std::move(text);
  }
  // A pty: stdout and stderr arrive merged as stdout (with the terminal's \r\n), stdin is
  // the terminal's input, and the size is 80x24.
  ASSIGN_OR_RETURN(s.tty, GetBool(b, "tty", false));
  ASSIGN_OR_RETURN(s.snapshot_before, GetBool(b, "snapshot_before", false));
  s.keep_stdin_open = background;
  return s;
}

nlohmann::json ExitJson(const node::Process& p) {
  auto e = p.exit_info();
  nlohmann::json j = {{"exit_code", nullptr}, {"signal", nullptr}, {"timed_out", false}, {"duration_ms", 0}};
  if (!e) return j;
  if (e->exit_code) j["exit_code"] = *e->exit_code;
  if (e->signal) j["signal"] = node::SignalName(*e->signal);
  j["timed_out"] = e->timed_out;
  j["duration_ms"] = e->duration_ms;
  return j;
}

nlohmann::json ProcessJson(const node::Process& p) {
  nlohmann::json j = {{"pid", p.id()},
                      {"cmd", p.spec().cmd},
                      {"user", p.spec().user},
                      {"cwd", p.spec().cwd},
                      {"started_at", FormatRfc3339(p.started_at_ms())},
                      {"state", p.exited() ? "exited" : "running"},
                      {"stdout_bytes", p.stdout_bytes()},
                      {"stderr_bytes", p.stderr_bytes()}};
  j.update(ExitJson(p));
  if (p.finished_at_ms()) j["finished_at"] = FormatRfc3339(p.finished_at_ms());
  return j;
}

std::string SseEvent(const std::string& name, const nlohmann::json& data) {
  return "event: " + name + "\ndata: " + data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n\n";
}

// Streams a process's events as SSE until it ends or the client leaves. Output chunks are
// sent as UTF-8 text when they are valid (an incomplete trailing character waits for the next
// chunk), as base64 otherwise.
void StreamProcess(node::Process& proc, Responder& res, const std::string& snapshot = "") {
  if (!res.StartStream(200, "text/event-stream").ok()) return;
  size_t next = 0;
  std::string carry[2];
  auto emit_output = [&](int idx, const char* name, std::string data, bool flush) -> Status {
    std::string buf = carry[idx] + data;
    size_t cut = flush ? buf.size() : Utf8CompletePrefix(buf);
    carry[idx] = buf.substr(cut);
    buf.resize(cut);
    if (buf.empty()) return Status::Ok();
    if (IsValidUtf8(buf)) return res.Write(SseEvent(name, {{"data", buf}}));
    return res.Write(SseEvent(name, {{"data_b64", Base64Encode(buf)}}));
  };
  for (;;) {
    std::vector<node::ProcessEvent> events;
    bool more = proc.Follow(&next, &events, kFollowSliceMs);
    for (auto& e : events) {
      Status st;
      switch (e.kind) {
        case node::ProcessEvent::Kind::kStart:
          st = res.Write(SseEvent("start", snapshot.empty() ? nlohmann::json{{"pid", proc.id()}}
                                                             : nlohmann::json{{"pid", proc.id()}, {"snapshot", snapshot}}));
          break;
        case node::ProcessEvent::Kind::kStdout:
          st = emit_output(0, "stdout", std::move(e.data), false);
          break;
        case node::ProcessEvent::Kind::kStderr:
          st = emit_output(1, "stderr", std::move(e.data), false);
          break;
        case node::ProcessEvent::Kind::kExit:
          st = emit_output(0, "stdout", "", true);
          if (st.ok()) st = emit_output(1, "stderr", "", true);
          if (st.ok()) st = res.Write(SseEvent("exit", ExitJson(proc)));
          break;
      }
      if (!st.ok()) return;  // client left; the process keeps running
    }
    if (!more) {
      if (Status f = proc.failure(); !f.ok() && !proc.exited()) {
        (void)res.Write(SseEvent("error", {{"code", std::string(StatusCodeWord(f.code()))}, {"message", f.message()}}));
      }
      return;
    }
    if (events.empty() && !res.Write(": keep-alive\n\n").ok()) return;
  }
}

}  // namespace

void Api::Exec(Request& req, Responder& res, const std::string& id) {
  if (Status st = AutoResume(req, id); !st.ok()) return res.SendError(st);
  auto spec = ParseProcessSpec(req.body, false);
  if (!spec.ok()) return res.SendError(spec.status());
  int64_t timeout_s = spec->timeout_s;
  // A snapshot just before a risky command, so the caller can roll back what it did.
  std::string before;
  if (spec->snapshot_before) {
    auto snap = node_->snapshots().Take(req.team, id, "before exec");
    if (!snap.ok()) return res.SendError(snap.status());
    before = snap->id;
  }
  auto proc = node_->io().Start(req.team, id, std::move(*spec));
  if (!proc.ok()) return res.SendError(proc.status());
  if (req.Header("accept").find("text/event-stream") != std::string::npos) return StreamProcess(**proc, res, before);
  // The guest enforces the timeout; the node waits a little longer for its verdict.
  if (!(*proc)->WaitExited((timeout_s + 10) * 1000)) {
    return res.SendError(Unavailable("process " + (*proc)->id() + " did not report its exit in time"));
  }
  nlohmann::json j = ExitJson(**proc);
  for (auto [kind, name] : {std::pair{node::ProcessEvent::Kind::kStdout, "stdout"},
                            std::pair{node::ProcessEvent::Kind::kStderr, "stderr"}}) {
    std::string out = (*proc)->Collected(kind);
    if (!IsValidUtf8(out)) j[std::string(name) + "_b64"] = Base64Encode(out);
    j[name] = std::move(out);  // dumped with U+FFFD replacing invalid bytes
  }
  j["truncated"] = (*proc)->truncated();
  j["pid"] = (*proc)->id();
  if (!before.empty()) j["snapshot"] = before;
  res.SendJson(200, j);
}

void Api::StartProcess(Request& req, Responder& res, const std::string& id) {
  if (Status st = AutoResume(req, id); !st.ok()) return res.SendError(st);
  auto spec = ParseProcessSpec(req.body, true);
  if (!spec.ok()) return res.SendError(spec.status());
  nlohmann::json out = nlohmann::json::object();
  if (spec->snapshot_before) {
    auto snap = node_->snapshots().Take(req.team, id, "before exec");
    if (!snap.ok()) return res.SendError(snap.status());
    out["snapshot"] = snap->id;
  }
  auto proc = node_->io().Start(req.team, id, std::move(*spec));
  if (!proc.ok()) return res.SendError(proc.status());
  out["pid"] = (*proc)->id();
  res.SendJson(201, out);
}

void Api::ListProcesses(Request& req, Responder& res, const std::string& id) {
  auto procs = node_->io().List(req.team, id);
  if (!procs.ok()) return res.SendError(procs.status());
  nlohmann::json out = nlohmann::json::array();
  for (const auto& p : *procs) out.push_back(ProcessJson(*p));
  res.SendJson(200, {{"processes", out}});
}

void Api::ProcessCall(Request& req, Responder& res, const std::string& id, const std::string& pid,
                      const std::string& action) {
  if (!IsPublicId(pid, "proc")) return res.SendError(NotFound("process " + pid.substr(0, 80) + " not found"));
  if (action == "stdin") {
    Status st = node_->io().WriteStdin(req.team, id, pid, req.body);
    return st.ok() ? res.SendJson(200, {{"written", req.body.size()}}) : res.SendError(st);
  }
  if (action == "signal") {
    auto b = ParseObject(req.body);
    if (!b.ok()) return res.SendError(b.status());
    if (Status st = CheckKnownFields(*b, {"signal"}); !st.ok()) return res.SendError(st);
    std::string name;
    if (b->contains("signal") && (*b)["signal"].is_number_integer()) {
      name = std::to_string((*b)["signal"].get<int64_t>());
    } else {
      auto s = GetString(*b, "signal", "SIGTERM", 16);
      if (!s.ok()) return res.SendError(s.status());
      name = *s;
    }
    auto sig = node::SignalNumber(name);
    if (!sig) return res.SendError(InvalidArgument("unknown signal '" + name + "'"));
    Status st = node_->io().Signal(req.team, id, pid, *sig);
    return st.ok() ? res.SendJson(200, {{"signal", node::SignalName(*sig)}}) : res.SendError(st);
  }
  auto proc = node_->io().Get(req.team, id, pid);
  if (!proc.ok()) return res.SendError(proc.status());
  if (action == "output") return StreamProcess(**proc, res);
  res.SendJson(200, ProcessJson(**proc));
}

void Api::Commands(Request& req, Responder& res, const std::string& id) {
  auto cmds = node_->io().Commands(req.team, id);
  if (!cmds.ok()) return res.SendError(cmds.status());
  nlohmann::json out = nlohmann::json::array();
  for (const auto& c : *cmds) {
    out.push_back({{"pid", c.pid},
                   {"cmd", c.cmd},
                   {"user", c.user},
                   {"cwd", c.cwd},
                   {"started_at", FormatRfc3339(c.started_at_ms)},
                   {"finished_at", c.finished_at_ms ? nlohmann::json(FormatRfc3339(c.finished_at_ms)) : nlohmann::json(nullptr)},
                   {"exit_code", c.exit_code ? nlohmann::json(*c.exit_code) : nlohmann::json(nullptr)},
                   {"signal", c.signal.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.signal)},
                   {"stdout_bytes", c.stdout_bytes},
                   {"stderr_bytes", c.stderr_bytes}});
  }
  res.SendJson(200, {{"commands", out}});
}

}  // namespace space::api
