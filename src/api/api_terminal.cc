// The terminal: a shell on a pty in the sandbox, over a WebSocket (the console's, or any
// client's). Binary messages carry the terminal's bytes both ways; text messages carry JSON
// control: from the client {"type":"resize","cols","rows"} and {"type":"end"}, from the
// server {"type":"started","pid"}, {"type":"exit",...} and {"type":"error","code","message"}.
//
// The shell is an ordinary background process with a tty, so it is in the command log and
// outlives a dropped connection: `?pid=` reattaches to it and replays its recent output.
#include <sys/socket.h>

#include <atomic>
#include <charconv>
#include <csignal>
#include <thread>

#include <nlohmann/json.hpp>

#include "api/api.h"
#include "common/ids.h"
#include "http/http_server.h"
#include "http/validate.h"
#include "http/websocket.h"
#include "protocol/protocol.h"

namespace space::api {
namespace {

constexpr char kSubprotocol[] = "space.terminal.v1";
// One message from the client: a paste, at most.
constexpr size_t kMaxInputMessageBytes = 1u << 20;
// Output frames coalesce what has arrived, up to this much.
constexpr size_t kMaxOutputFrameBytes = 256 * 1024;
// Without output for this long the server pings, so idle relays (the front's) keep the
// connection and a client that vanished is noticed.
constexpr int64_t kPingIntervalMs = 50'000;
constexpr int64_t kTerminalTimeoutS = 86400;
// Prefers bash (a login shell, so the user's profile runs), falls back to sh.
constexpr char kShell[] = "command -v bash >/dev/null 2>&1 && exec bash -l; exec sh -l";

struct TerminalRequest {
  std::string accept;  // Sec-WebSocket-Accept
  bool subprotocol = false;
  std::string user = "root";
  int cols = 80;
  int rows = 24;
  std::string pid;  // reattach to this shell
};

bool HasToken(const std::string& header, std::string_view token) {
  size_t start = 0;
  while (start <= header.size()) {
    size_t end = header.find(',', start);
    if (end == std::string::npos) end = header.size();
    std::string t = header.substr(start, end - start);
    while (!t.empty() && t.front() == ' ') t.erase(0, 1);
    while (!t.empty() && t.back() == ' ') t.pop_back();
    if (t.size() == token.size() && std::equal(t.begin(), t.end(), token.begin(), [](char a, char b) {
          return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
        })) {
      return true;
    }
    start = end + 1;
  }
  return false;
}

Result<int> SizeParam(const Request& req, const char* name, int fallback) {
  if (!req.HasQuery(name)) return fallback;
  const std::string v = req.Query(name);
  int n = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || end != v.data() + v.size() || n < 1 || n > static_cast<int>(guest::kMaxTtySize)) {
    return InvalidArgument(std::string("query '") + name + "' must be 1.." + std::to_string(guest::kMaxTtySize));
  }
  return n;
}

// The host[:port] of an Origin ("http://h:1" -> "h:1"), lowercased; "" when it has none.
std::string OriginHost(const std::string& origin) {
  size_t p = origin.find("://");
  if (p == std::string::npos) return "";
  std::string h = origin.substr(p + 3);
  if (h.find('/') != std::string::npos) h.erase(h.find('/'));
  for (char& c : h) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return h;
}

Result<TerminalRequest> ParseTerminalRequest(const Request& req) {
  if (!HasToken(req.Header("upgrade"), "websocket")) {
    return InvalidArgument("the terminal is a WebSocket: send 'Upgrade: websocket'");
  }
  if (req.Header("sec-websocket-version") != "13") return InvalidArgument("only WebSocket version 13 is spoken");
  const std::string key = req.Header("sec-websocket-key");
  if (!IsWebSocketKey(key)) return InvalidArgument("'Sec-WebSocket-Key' must be base64 of 16 bytes");
  // A page on another site may open a WebSocket here with the browser's ambient state. The
  // key is not ambient (no cookie carries it), and the origin must be this server anyway.
  const std::string origin = req.Header("origin");
  if (!origin.empty()) {
    std::string host = req.Header("host");
    for (char& c : host) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (host.empty() || OriginHost(origin) != host) {
      return PermissionDenied("cross-site WebSocket refused: Origin '" + origin.substr(0, 200) +
                              "' is not this server ('" + host.substr(0, 200) + "')");
    }
  }
  TerminalRequest t;
  t.accept = WebSocketAccept(key);
  t.subprotocol = HasToken(req.Header("sec-websocket-protocol"), kSubprotocol);
  if (req.HasQuery("user")) t.user = req.Query("user");
  if (!IsUserName(t.user)) return InvalidArgument("query 'user' is not a valid user name or uid");
  ASSIGN_OR_RETURN(t.cols, SizeParam(req, "cols", 80));
  ASSIGN_OR_RETURN(t.rows, SizeParam(req, "rows", 24));
  t.pid = req.Query("pid");
  if (!t.pid.empty() && !IsPublicId(t.pid, "proc")) return NotFound("process " + t.pid.substr(0, 80) + " not found");
  return t;
}

std::string ControlJson(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

nlohmann::json ExitMessage(const node::Process& p) {
  nlohmann::json j = {{"type", "exit"}, {"exit_code", nullptr}, {"signal", nullptr}};
  if (auto e = p.exit_info()) {
    if (e->exit_code) j["exit_code"] = *e->exit_code;
    if (e->signal) j["signal"] = node::SignalName(*e->signal);
  }
  return j;
}

// Sends the shell's output until it exits, the client leaves (`stop`) or a send fails.
void PumpOutput(node::Process& proc, WsConnection& ws, int fd, const std::atomic<bool>& stop) {
  size_t next = 0;
  int64_t quiet_ms = 0;
  for (;;) {
    std::vector<node::ProcessEvent> events;
    bool more = proc.Follow(&next, &events, 1000);
    if (stop.load()) return;
    std::string out;
    bool exited = false;
    for (auto& e : events) {
      if (e.kind == node::ProcessEvent::Kind::kStdout || e.kind == node::ProcessEvent::Kind::kStderr) out += e.data;
      if (e.kind == node::ProcessEvent::Kind::kExit) exited = true;
      if (out.size() >= kMaxOutputFrameBytes) {
        if (!ws.Send(WsOpcode::kBinary, out).ok()) return;
        out.clear();
      }
    }
    if (!out.empty() && !ws.Send(WsOpcode::kBinary, out).ok()) return;
    quiet_ms = events.empty() ? quiet_ms + 1000 : 0;
    if (quiet_ms >= kPingIntervalMs) {
      if (!ws.Send(WsOpcode::kPing, "").ok()) return;
      quiet_ms = 0;
    }
    if (exited || !more) {
      if (exited) {
        (void)ws.Send(WsOpcode::kText, ControlJson(ExitMessage(proc)));
      } else if (Status f = proc.failure(); !f.ok()) {
        (void)ws.Send(WsOpcode::kText, ControlJson({{"type", "error"},
                                                    {"code", std::string(StatusCodeWord(f.code()))},
                                                    {"message", f.message()}}));
      }
      ws.Close(1000, "the shell ended");
      ::shutdown(fd, SHUT_RDWR);  // ends the reader's wait
      return;
    }
  }
}

}  // namespace

void Api::Terminal(Request& req, Responder& res, const std::string& id) {
  auto t = ParseTerminalRequest(req);
  if (!t.ok()) return res.SendError(t.status());
  if (Status st = AutoResume(req, id); !st.ok()) return res.SendError(st);
  std::shared_ptr<node::Process> proc;
  if (!t->pid.empty()) {
    auto found = node_->io().Get(req.team, id, t->pid);
    if (!found.ok()) return res.SendError(found.status());
    if (!(*found)->spec().tty || (*found)->exited()) {
      return res.SendError(Conflict("process " + t->pid + " is not a running terminal"));
    }
    proc = *found;
    (void)node_->io().Resize(req.team, id, t->pid, t->cols, t->rows);
  } else {
    node::ProcessSpec spec;
    spec.cmd = {"/bin/sh", "-c", kShell};
    spec.env = {{"TERM", "xterm-256color"}, {"COLORTERM", "truecolor"}};
    spec.user = t->user;
    spec.timeout_s = kTerminalTimeoutS;
    spec.keep_stdin_open = true;
    spec.tty = true;
    spec.tty_cols = t->cols;
    spec.tty_rows = t->rows;
    spec.output_ring = true;
    auto started = node_->io().Start(req.team, id, std::move(spec));
    if (!started.ok()) return res.SendError(started.status());
    proc = *started;
    if (Status st = proc->WaitStarted(15000); !st.ok()) return res.SendError(st);
  }

  auto raw = res.TakeConnection();
  if (!raw.ok()) return;
  const int fd = raw->fd;
  // The front relays raw bytes after the node's `101 space-ingress`; what follows is the
  // client's WebSocket handshake answer.
  std::string head = std::string("HTTP/1.1 101 Switching Protocols\r\nUpgrade: ") + kIngressUpgrade +
                     "\r\nConnection: upgrade\r\n\r\n"
                     "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                     "Sec-WebSocket-Accept: " +
                     t->accept + "\r\n";
  if (t->subprotocol) head += std::string("Sec-WebSocket-Protocol: ") + kSubprotocol + "\r\n";
  head += "\r\n";
  if (::send(fd, head.data(), head.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(head.size())) return;

  WsConnection ws(fd, kMaxInputMessageBytes, std::move(raw->leftover));
  const std::string pid = proc->id();
  if (!ws.Send(WsOpcode::kText, ControlJson({{"type", "started"}, {"pid", pid}})).ok()) return;
  std::atomic<bool> stop{false};
  std::thread pump([&] { PumpOutput(*proc, ws, fd, stop); });
  for (;;) {
    auto m = ws.Read(60'000);
    if (!m.ok()) {
      if (m.status().code() == StatusCode::kDeadlineExceeded) continue;
      break;
    }
    if (m->opcode == WsOpcode::kBinary) {
      if (!node_->io().WriteStdin(req.team, id, pid, m->payload).ok()) break;
      continue;
    }
    auto j = nlohmann::json::parse(m->payload, nullptr, false);
    const std::string type =
        j.is_object() && j.contains("type") && j["type"].is_string() ? j["type"].get<std::string>() : "";
    Status st;
    if (type == "resize") {
      auto cols = GetInt(j, "cols", 0, 1, guest::kMaxTtySize);
      auto rows = GetInt(j, "rows", 0, 1, guest::kMaxTtySize);
      st = !cols.ok()   ? cols.status()
           : !rows.ok() ? rows.status()
                        : node_->io().Resize(req.team, id, pid, static_cast<int>(*cols), static_cast<int>(*rows));
    } else if (type == "end") {
      st = node_->io().Signal(req.team, id, pid, SIGHUP);
    } else {
      st = InvalidArgument("a text message must be JSON with \"type\": \"resize\" or \"end\"");
    }
    if (!st.ok()) {
      (void)ws.Send(WsOpcode::kText, ControlJson({{"type", "error"},
                                                  {"code", std::string(StatusCodeWord(st.code()))},
                                                  {"message", st.message()}}));
    }
  }
  stop.store(true);
  ::shutdown(fd, SHUT_RDWR);  // fails the pump's next send at once
  pump.join();
}

}  // namespace space::api
