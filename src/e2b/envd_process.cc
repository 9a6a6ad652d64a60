// envd's process service (process.Process/*) relayed to the sandbox's guest via the Node.
// Pids are the guest's own pids, so a process started here can be found with `ps` inside.
#include <cctype>
#include <csignal>
#include <cstring>
#include <optional>
#include <utility>

#include "common/base64.h"
#include "e2b/connect.h"
#include "e2b/e2b.h"
#include "e2b/exec_service_py.h"
#include "e2b/proto_json.h"
#include "e2b/rpc_request.h"
#include "protocol/protocol.h"

namespace space::e2b {
namespace {

using nlohmann::json;

constexpr int64_t kKeepaliveMs = 15000;  // well under the SDK's 50 s ping interval
constexpr size_t kMaxArgs = 4096;
constexpr size_t kMaxArgBytes = 65536;
constexpr size_t kMaxTags = 4096;

// Go's ProcessState.String() wording, which envd reports and users may match on.
std::string SignalWords(int sig) {
  const char* s = ::strsignal(sig);
  std::string w = s ? s : "signal " + std::to_string(sig);
  if (!w.empty()) w[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(w[0])));
  return w;
}

json EndEvent(const node::Process& p) {
  json end = {{"exitCode", -1}, {"exited", false}, {"status", "unknown"}};
  auto e = p.exit_info();
  if (e && e->exit_code) {
    end["exitCode"] = *e->exit_code;
    end["exited"] = true;
    end["status"] = "exit status " + std::to_string(*e->exit_code);
    if (*e->exit_code != 0) end["error"] = end["status"];
  } else if (e && e->signal) {
    end["status"] = "signal: " + SignalWords(*e->signal);
    end["error"] = e->timed_out ? "signal: killed (deadline exceeded)" : end["status"].get<std::string>();
  } else {
    Status f = p.failure();
    end["error"] = f.ok() ? "process ended without an exit status" : f.message();
  }
  return {{"event", {{"end", end}}}};
}

// PTY.size {"cols","rows"} of a StartRequest's or UpdateRequest's `pty` field.
Result<std::pair<int, int>> PtySize(const json& msg) {
  const json& pty = msg["pty"];
  if (!pty.is_object() || !pty.contains("size") || !pty["size"].is_object()) {
    return InvalidArgument("pty.size {cols, rows} is required");
  }
  const json& size = pty["size"];
  auto dim = [&](const char* name) -> std::optional<int> {
    if (!size.contains(name)) return std::nullopt;
    auto v = AsUint(size[name]);
    if (!v || *v < 1 || *v > guest::kMaxTtySize) return std::nullopt;
    return static_cast<int>(*v);
  };
  auto cols = dim("cols");
  auto rows = dim("rows");
  if (!cols || !rows) {
    return InvalidArgument("pty.size cols and rows must be 1.." + std::to_string(guest::kMaxTtySize));
  }
  return std::pair{*cols, *rows};
}

json DataEvent(const char* stream, const std::string& data) {
  return {{"event", {{"data", {{stream, Base64Encode(data)}}}}}};
}

// Streams a process's events as StartResponse/ConnectResponse messages. `from_now` skips
// output printed before the call (Connect re-attaches to live output, as envd does).
void StreamEvents(ConnectStream& out, node::Process& proc, bool from_now) {
  if (!out.Send({{"event", {{"start", {{"pid", proc.guest_pid()}}}}}}).ok()) return;
  // A pty has one output stream: the guest reports it as stdout, envd as pty bytes.
  const char* stdout_field = proc.spec().tty ? "pty" : "stdout";
  size_t next = 0;
  bool skipping = from_now;
  for (;;) {
    std::vector<node::ProcessEvent> events;
    bool more = proc.Follow(&next, &events, skipping ? 0 : kKeepaliveMs);
    for (auto& e : events) {
      Status st;
      switch (e.kind) {
        case node::ProcessEvent::Kind::kStart:
          break;
        case node::ProcessEvent::Kind::kStdout:
          if (!skipping) st = out.Send(DataEvent(stdout_field, e.data));
          break;
        case node::ProcessEvent::Kind::kStderr:
          if (!skipping) st = out.Send(DataEvent("stderr", e.data));
          break;
        case node::ProcessEvent::Kind::kExit:
          st = out.Send(EndEvent(proc));
          break;
      }
      // The client left: the process keeps running (Connect can re-attach), as in envd.
      if (!st.ok()) return;
    }
    skipping = false;
    if (!more) {
      Status f = proc.failure();
      if (!proc.exited() && !f.ok()) return out.End(f);
      return out.End();
    }
    if (events.empty() && !out.Send({{"event", {{"keepalive", json::object()}}}}).ok()) return;
  }
}

}  // namespace

namespace {

Result<std::shared_ptr<node::Process>> FindProcess(node::Node* node, const Target& t, const Selector& sel,
                                                   const std::map<std::string, std::string>& tags) {
  ASSIGN_OR_RETURN(auto procs, node->io().List(t.team, t.id));
  std::shared_ptr<node::Process> found;
  for (const auto& p : procs) {
    bool match = sel.pid != 0 ? p->guest_pid() == sel.pid : (tags.count(p->id()) && tags.at(p->id()) == sel.tag);
    // A pid may be reused once its process ended: the running one wins.
    if (match && (!found || (found->exited() && !p->exited()))) found = p;
  }
  if (!found) {
    return NotFound(sel.pid != 0 ? "process with pid " + std::to_string(sel.pid) + " not found"
                                 : "process with tag " + sel.tag + " not found");
  }
  return found;
}

Result<std::shared_ptr<node::Process>> FindRunning(node::Node* node, const Target& t, const Selector& sel,
                                                   const std::map<std::string, std::string>& tags) {
  ASSIGN_OR_RETURN(auto p, FindProcess(node, t, sel, tags));
  if (p->exited()) return NotFound("process " + std::to_string(p->guest_pid()) + " has exited");
  return p;
}

}  // namespace

void E2b::ProcessRpc(api::Request& req, api::Responder& res, const Target& t, const std::string& method) {
  std::map<std::string, std::string> tags;
  {
    std::lock_guard<std::mutex> lock(mu_);
    tags = tags_;
  }
  if (method == "Start" || method == "Connect") {
    ConnectStream out(res);
    auto msg = StreamRequestMessage(req);
    if (!msg.ok()) return out.End(msg.status());
    if (method == "Connect") {
      auto sel = SelectorField(*msg, "process");
      if (!sel.ok()) return out.End(sel.status());
      auto proc = FindRunning(node_, t, *sel, tags);
      if (!proc.ok()) return out.End(proc.status());
      return StreamEvents(out, **proc, /*from_now=*/true);
    }
    std::optional<std::pair<int, int>> pty;
    if (msg->contains("pty") && !(*msg)["pty"].is_null()) {
      auto size = PtySize(*msg);
      if (!size.ok()) return out.End(size.status());
      pty = *size;
    }
    const json empty = json::object();
    const json& pc = msg->contains("process") && (*msg)["process"].is_object() ? (*msg)["process"] : empty;
    auto cmd = StringField(pc, "cmd", 4096);
    if (!cmd.ok()) return out.End(cmd.status());
    if (cmd->empty()) return out.End(InvalidArgument("process.cmd is required"));
    node::ProcessSpec spec;
    spec.cmd.push_back(*cmd);
    if (pc.contains("args") && !pc["args"].is_null()) {
      if (!pc["args"].is_array() || pc["args"].size() > kMaxArgs) {
        return out.End(InvalidArgument("process.args must be a list of at most 4096 strings"));
      }
      for (const auto& a : pc["args"]) {
        if (!a.is_string() || a.get_ref<const std::string&>().size() > kMaxArgBytes) {
          return out.End(InvalidArgument("process.args entries must be strings of at most 64 KiB"));
        }
        spec.cmd.push_back(a.get<std::string>());
      }
    }
    auto envs = StringMapField(pc, "envs", 256, 32768);
    if (!envs.ok()) return out.End(envs.status());
    spec.env.assign(envs->begin(), envs->end());
    auto cwd = StringField(pc, "cwd", 4096);
    if (!cwd.ok()) return out.End(cwd.status());
    if (!cwd->empty()) {
      auto abs = ResolvePath(*cwd, t.home);
      if (!abs.ok()) return out.End(abs.status());
      spec.cwd = *abs;
    }
    auto tag = StringField(*msg, "tag", 256);
    if (!tag.ok()) return out.End(tag.status());
    spec.user = t.user;
    // envd keeps stdin open unless told otherwise; the SDK sends stdin:false for commands.
    spec.keep_stdin_open = !(msg->contains("stdin") && (*msg)["stdin"].is_boolean() && !(*msg)["stdin"].get<bool>());
    if (pty) {
      spec.tty = true;
      spec.tty_cols = pty->first;
      spec.tty_rows = pty->second;
      spec.keep_stdin_open = true;  // input to a pty always goes through
    }
    // envd kills the process at the call's deadline (Connect-Timeout-Ms); none without it.
    auto deadline = ConnectTimeoutMs(req);
    if (!deadline.ok()) return out.End(deadline.status());
    spec.timeout_s = (*deadline + 999) / 1000;
    auto proc = node_->io().Start(t.team, t.id, std::move(spec));
    if (!proc.ok()) return out.End(proc.status());
    if (!tag->empty()) {
      std::lock_guard<std::mutex> lock(mu_);
      // Bounded: past the cap the arbitrary (random-id order) first entry goes.
      if (tags_.size() >= kMaxTags) tags_.erase(tags_.begin());
      tags_[(*proc)->id()] = *tag;
    }
    return StreamEvents(out, **proc, /*from_now=*/false);
  }

  auto msg = UnaryMessage(req);
  if (!msg.ok()) return SendRpcError(res, msg.status());
  if (method == "List") {
    auto procs = node_->io().List(t.team, t.id);
    if (!procs.ok()) return SendRpcError(res, procs.status());
    json list = json::array();
    for (const auto& p : *procs) {
      if (p->exited() || p->guest_pid() == 0) continue;
      const auto& spec = p->spec();
      // The code interpreter's service is SPACE's machinery, not one of the user's commands.
      if (spec.cmd.size() == 4 && spec.cmd[3] == kExecServicePy) continue;
      json config = {{"cmd", spec.cmd.empty() ? "" : spec.cmd[0]}, {"args", json::array()}, {"envs", json::object()}};
      for (size_t i = 1; i < spec.cmd.size(); ++i) config["args"].push_back(spec.cmd[i]);
      for (const auto& [k, v] : spec.env) config["envs"][k] = v;
      if (!spec.cwd.empty()) config["cwd"] = spec.cwd;
      json info = {{"pid", p->guest_pid()}, {"config", config}};
      if (auto it = tags.find(p->id()); it != tags.end()) info["tag"] = it->second;
      list.push_back(info);
    }
    return SendUnary(res, {{"processes", list}});
  }
  auto sel = SelectorField(*msg, "process");
  if (!sel.ok()) return SendRpcError(res, sel.status());
  auto proc = FindRunning(node_, t, *sel, tags);
  if (!proc.ok()) return SendRpcError(res, proc.status());
  if (method == "SendInput") {
    const json empty = json::object();
    const json& input = msg->contains("input") && (*msg)["input"].is_object() ? (*msg)["input"] : empty;
    // ProcessInput is a oneof: pty bytes go to the terminal, stdin bytes to the pipe; in
    // the guest both are the process's input stream.
    const bool to_pty = input.contains("pty") && !input["pty"].is_null();
    if (to_pty && !(*proc)->spec().tty) {
      return SendRpcError(res, "invalid_argument", "process " + std::to_string((*proc)->guest_pid()) + " has no pty");
    }
    auto data = BytesField(input, to_pty ? "pty" : "stdin", kMaxUnaryBytes);
    if (!data.ok()) return SendRpcError(res, data.status());
    // An empty write would close stdin in the node's protocol; envd treats it as a no-op.
    if (!data->empty()) {
      Status st = node_->io().WriteStdin(t.team, t.id, (*proc)->id(), *data);
      if (!st.ok()) return SendRpcError(res, st);
    }
    return SendUnary(res, json::object());
  }
  if (method == "CloseStdin") {
    Status st = node_->io().WriteStdin(t.team, t.id, (*proc)->id(), "");
    return st.ok() ? SendUnary(res, json::object()) : SendRpcError(res, st);
  }
  if (method == "SendSignal") {
    int sig = 0;
    const json& s = msg->contains("signal") ? (*msg)["signal"] : json();
    if (s.is_string()) {
      sig = s == "SIGNAL_SIGKILL" ? SIGKILL : s == "SIGNAL_SIGTERM" ? SIGTERM : 0;
    } else if (AsUint(s) && (*AsUint(s) == SIGKILL || *AsUint(s) == SIGTERM)) {
      sig = static_cast<int>(*AsUint(s));
    }
    if (sig == 0) return SendRpcError(res, "invalid_argument", "signal must be SIGNAL_SIGKILL or SIGNAL_SIGTERM");
    Status st = node_->io().Signal(t.team, t.id, (*proc)->id(), sig);
    if (st.code() == StatusCode::kConflict) return SendRpcError(res, "not_found", st.message());
    return st.ok() ? SendUnary(res, json::object()) : SendRpcError(res, st);
  }
  if (method == "Update") {
    // UpdateRequest {process, pty: {size}}: only a pty's size can change.
    if (!msg->contains("pty") || (*msg)["pty"].is_null()) return SendUnary(res, json::object());
    auto size = PtySize(*msg);
    if (!size.ok()) return SendRpcError(res, size.status());
    Status st = node_->io().Resize(t.team, t.id, (*proc)->id(), size->first, size->second);
    if (st.code() == StatusCode::kConflict) return SendRpcError(res, "not_found", st.message());
    return st.ok() ? SendUnary(res, json::object()) : SendRpcError(res, st);
  }
  SendRpcError(res, "unimplemented", "process." + method.substr(0, 64) + " is not implemented");
}

}  // namespace space::e2b
