#include "cli/commands.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <filesystem>
#include <string>

#include "broker/broker.h"
#include "runtime/vm/vmm_reaper.h"
#include "front/front.h"
#include "common/base64.h"
#include "cli/client.h"
#include "cli/egress_commands.h"
#include "cli/dev.h"
#include "cli/fleet_commands.h"
#include "common/syscall.h"
#include "gateway/worker.h"
#include "node/build_jail.h"
#include "node/tree_jail.h"

namespace space::cli {
namespace {

int Fail(const Status& st) {
  std::cerr << "space: " << st.message() << "\n";
  return 1;
}

// Runs a call and prints the JSON body (or a human summary via `human`), returning the exit code.
int PrintCall(Client& c, const std::string& method, const std::string& target, const std::string& body, bool json,
              const std::function<void(const nlohmann::json&)>& human,
              const std::map<std::string, std::string>& headers = {}) {
  auto r = c.Call(method, target, body, "application/json", headers);
  if (!r.ok()) return Fail(r.status());
  if (r->status >= 300) return Fail(ResponseError(*r));
  auto j = nlohmann::json::parse(r->body, nullptr, false);
  if (json || !human) {
    std::cout << (j.is_discarded() ? r->body : j.dump(2)) << "\n";
  } else {
    human(j);
  }
  return 0;
}

std::map<std::string, std::string> ParsePairs(const std::vector<std::string>& pairs) {
  std::map<std::string, std::string> m;
  for (const auto& p : pairs) {
    size_t eq = p.find('=');
    if (eq == std::string::npos) {
      m[p] = "";
    } else {
      m[p.substr(0, eq)] = p.substr(eq + 1);
    }
  }
  return m;
}

// "sbx_x:/path" -> {"sbx_x", "/path"}; a local path -> {"", path}.
std::pair<std::string, std::string> SplitRemote(const std::string& s) {
  size_t colon = s.find(':');
  if (s.rfind("sbx_", 0) == 0 && colon != std::string::npos) return {s.substr(0, colon), s.substr(colon + 1)};
  return {"", s};
}

// The hidden helper subcommands below are started by the node only, never by people: parsed
// by hand (left out of --help) as exactly the `--name N` pairs in `flags`, each N a positive
// int; false on anything else.
bool ParseHelperFlags(int argc, char** argv, std::map<std::string, long>* flags) {
  if (argc != 2 + 2 * static_cast<int>(flags->size())) return false;
  std::set<std::string> seen;
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    char* end = nullptr;
    long v = std::strtol(argv[i + 1], &end, 10);
    if (end == argv[i + 1] || *end != '\0' || v <= 0 || v > 0x7fffffffL) return false;
    if (!flags->count(flag) || !seen.insert(flag).second) return false;
    (*flags)[flag] = v;
  }
  return true;
}

// `space gateway-worker --fd N --node-pid P --uid U`: the node's unprivileged egress gateway
// (node/gateway_process.h).
int RunGatewayWorkerCommand(int argc, char** argv) {
  std::map<std::string, long> f = {{"--fd", 0}, {"--node-pid", 0}, {"--uid", 0}};
  if (!ParseHelperFlags(argc, argv, &f) || f["--fd"] < 3 || f["--uid"] < static_cast<long>(gateway::kMinWorkerUid)) {
    std::cerr << "space gateway-worker: started by the node only (--fd N --node-pid P --uid U)\n";
    return 2;
  }
  int code = gateway::RunGatewayWorker(static_cast<int>(f["--fd"]), static_cast<pid_t>(f["--node-pid"]),
                                       static_cast<uid_t>(f["--uid"]));
  // Connection threads may still be unwinding; skip static destructors under them.
  std::fflush(nullptr);
  ::_exit(code);
}

// `space broker --fd N --node-pid P --cgroup-name space-<16 hex> --pool-dir /ABS/PATH
// --import-root /ABS/PATH`: the root broker of `space dev` / `space node` (broker/broker.h).
// The string flags come last.
int RunBrokerCommand(int argc, char** argv) {
  std::map<std::string, long> f = {{"--fd", 0}, {"--node-pid", 0}};
  const bool named = argc == 12 && std::string(argv[6]) == "--cgroup-name" && broker::IsNodeCgroupName(argv[7]) &&
                     std::string(argv[8]) == "--pool-dir" && argv[9][0] == '/' &&
                     std::string(argv[10]) == "--import-root" && argv[11][0] == '/';
  if (!named || !ParseHelperFlags(argc - 6, argv, &f) || f["--fd"] < 3) {
    std::cerr << "space broker: started by the node only (--fd N --node-pid P --cgroup-name NAME --pool-dir DIR "
                 "--import-root DIR)\n";
    return 2;
  }
  return broker::RunBroker(static_cast<int>(f["--fd"]), static_cast<pid_t>(f["--node-pid"]), argv[7], argv[9],
                           argv[11]);
}

// `space api-front --channel-fd N --listen-fd M --node-pid P`: the API front of `space dev` /
// `space node` (front/front.h).
int RunFrontCommand(int argc, char** argv) {
  std::map<std::string, long> f = {{"--channel-fd", 0}, {"--listen-fd", 0}, {"--node-pid", 0}};
  if (!ParseHelperFlags(argc, argv, &f) || f["--channel-fd"] < 3 || f["--listen-fd"] < 3 ||
      f["--channel-fd"] == f["--listen-fd"]) {
    std::cerr << "space api-front: started by the node only (--channel-fd N --listen-fd M --node-pid P)\n";
    return 2;
  }
  int code = front::RunFront(static_cast<int>(f["--channel-fd"]), static_cast<int>(f["--listen-fd"]),
                             static_cast<pid_t>(f["--node-pid"]));
  // Connection threads may still be inside a request; skip static destructors under them.
  std::fflush(nullptr);
  ::_exit(code);
}

// `space vmm-reaper --alive-fd N --qemu-pid P`: pid 1 of a VMM's PID namespace
// (runtime/vm/vmm_reaper.h), exec'd by the VMM's launcher.
int RunVmmReaperCommand(int argc, char** argv) {
  std::map<std::string, long> f = {{"--alive-fd", 0}, {"--qemu-pid", 0}};
  if (!ParseHelperFlags(argc, argv, &f) || f["--alive-fd"] < 3) {
    std::cerr << "space vmm-reaper: started by the vm runtime only (--alive-fd N --qemu-pid P)\n";
    return 2;
  }
  return runtime::vm::RunVmmReaper(static_cast<int>(f["--alive-fd"]), static_cast<pid_t>(f["--qemu-pid"]));
}

}  // namespace

int Main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "vmm-reaper") return RunVmmReaperCommand(argc, argv);
  if (argc >= 2 && std::string(argv[1]) == "gateway-worker") return RunGatewayWorkerCommand(argc, argv);
  if (argc >= 2 && std::string(argv[1]) == "broker") return RunBrokerCommand(argc, argv);
  if (argc >= 2 && std::string(argv[1]) == "api-front") return RunFrontCommand(argc, argv);
  if (argc >= 2 && std::string(argv[1]) == "tree-jail") {
    int code = node::TreeJailMain(argc, argv);
    std::fflush(nullptr);
    ::_exit(code);  // as the build jail's: no exit-time handlers
  }
  if (argc >= 2 && std::string(argv[1]) == "build-jail") {
    int code = node::BuildJailMain(argc, argv);
    std::fflush(nullptr);
    ::_exit(code);  // no exit-time handlers in the jail's namespaces
  }
  CLI::App app{"SPACE: sandboxes for agentic code execution"};
  app.require_subcommand(1);
  bool json = false;
  app.add_flag("--json", json, "machine-readable output");

  DevOptions dev;
  auto* dev_cmd = app.add_subcommand("dev", "run the all-in-one server on this machine");
  dev_cmd->add_option("--listen", dev.listen, "ADDR:PORT (port 0 picks a free one)");
  dev_cmd->add_option("--data-dir", dev.data_dir, "state directory");
  dev_cmd->add_option("--store", dev.store,
                      "store URL: a SQLite path or sqlite://PATH, or postgres://USER:PASS@HOST:PORT/DB "
                      "(default: SQLite at <data-dir>/state.db)");
  dev_cmd->add_option("--guest", dev.guest_binary, "path of the static spaced binary");
  dev_cmd->add_flag("--overlay", dev.force_overlay,
                    "use overlayfs instead of btrfs for sandbox roots (refused today: overlayfs cannot be idmapped)");
  dev_cmd->add_option("--api-rate-limit", dev.api_rate_limit,
                      "requests per second per API key, RATE[:BURST] (default 1000:2000; 0 = off)");
  dev_cmd->add_option("--warm-pool", dev.warm_pool,
                      "pre-created sandboxes per template, TEMPLATE=N[,TEMPLATE=N...] (default: none)");
  dev_cmd->add_flag("--no-egress", dev.no_egress, "no sandbox network at all (egress profiles are refused)");
  dev_cmd->add_option("--import-root", dev.import_root,
                      "directory template imports may read, resolved as their root (default /: anywhere)");
  dev_cmd->add_option("--egress-dns", dev.egress_dns, "resolver the egress gateway asks (IP[:PORT]; default: resolv.conf)");
  dev_cmd->add_option("--egress-upstream-ca", dev.egress_upstream_ca,
                      "extra CA certificate file the gateway trusts for upstream TLS");

  std::string tmpl = "base", runtime = "ns", id, src, dst, name;
  int64_t timeout = 0;
  std::vector<std::string> env, meta, cmd;
  bool no_wait = false;
  auto* create = app.add_subcommand("create", "create a sandbox and print its id");
  create->add_option("--template,-t", tmpl, "template name");
  create->add_option("--runtime", runtime, "ns (namespaces, default) or vm (a microVM with its own kernel)");
  create->add_option("--timeout", timeout, "seconds until the sandbox is destroyed");
  create->add_option("--env,-e", env, "K=V environment for every process");
  create->add_option("--metadata,-m", meta, "k=v metadata");
  create->add_flag("--no-wait", no_wait, "return once accepted, before it runs");
  std::vector<std::string> egress_profiles, creds;
  create->add_option("--egress", egress_profiles, "egress profile (repeatable; none = no network)");
  create->add_option("--cred", creds, "credential whose placeholder the sandbox gets (repeatable)");
  EgressCommands egress_commands;
  egress_commands.Register(app);
  FleetCommands fleet_commands;
  fleet_commands.Register(app);

  auto* ls = app.add_subcommand("ls", "list sandboxes");
  auto* inspect = app.add_subcommand("inspect", "show a sandbox");
  inspect->add_option("id", id)->required();
  auto* rm = app.add_subcommand("rm", "destroy a sandbox");
  rm->add_option("id", id)->required();
  auto* logs = app.add_subcommand("logs", "list the commands run in a sandbox");
  logs->add_option("id", id)->required();

  std::string user, cwd;
  auto* exec = app.add_subcommand("exec", "run a command in a sandbox, streaming its output");
  exec->add_option("id", id)->required();
  exec->add_option("--user,-u", user, "user to run as (default root)");
  exec->add_option("--cwd,-w", cwd, "working directory");
  exec->add_option("--env,-e", env, "K=V");
  exec->add_option("--timeout", timeout, "seconds before the command is killed");
  exec->add_option("cmd", cmd, "command and arguments (after --)")->required();

  auto* cp = app.add_subcommand("cp", "copy a file into or out of a sandbox (ID:/path)");
  cp->add_option("src", src)->required();
  cp->add_option("dst", dst)->required();

  std::string snap, label, against;
  int count = 1;
  auto* pause = app.add_subcommand("pause", "freeze every process of a sandbox");
  pause->add_option("id", id)->required();
  auto* resume = app.add_subcommand("resume", "thaw a paused sandbox, or bring a suspended one back");
  resume->add_option("id", id)->required();
  auto* suspend = app.add_subcommand("suspend", "snapshot to the store, stop, and free the node's resources");
  suspend->add_option("id", id)->required();
  auto* snapshot = app.add_subcommand("snapshot", "take a snapshot of a sandbox's files (prints its id)");
  snapshot->add_option("id", id)->required();
  snapshot->add_option("--label,-l", label, "a name for the snapshot");
  auto* snapshots = app.add_subcommand("snapshots", "list a sandbox's snapshots");
  snapshots->add_option("id", id)->required();
  auto* fork = app.add_subcommand("fork", "new sandboxes from a snapshot (default: one taken now)");
  fork->add_option("id", id)->required();
  fork->add_option("--snapshot,-s", snap, "snapshot to fork from");
  fork->add_option("--count,-n", count, "how many");
  auto* rollback = app.add_subcommand("rollback", "return a sandbox's files to a snapshot");
  rollback->add_option("id", id)->required();
  rollback->add_option("snapshot", snap)->required();
  auto* diff = app.add_subcommand("diff", "files added, changed and removed between two snapshots");
  diff->add_option("snapshot", snap)->required();
  diff->add_option("against", against)->required();

  auto* tpl = app.add_subcommand("template", "manage templates");
  tpl->require_subcommand(1);
  auto* tpl_ls = tpl->add_subcommand("ls", "list templates");
  auto* tpl_build = tpl->add_subcommand("build", "build a built-in template (base, busybox), with progress");
  tpl_build->add_option("name", name)->required();
  auto* tpl_import = tpl->add_subcommand("import", "import a directory or tarball (path on the server) as a template");
  tpl_import->add_option("source", src)->required();
  tpl_import->add_option("name", name)->required();

  CLI11_PARSE(app, argc, argv);

  if (dev_cmd->parsed()) return RunDev(dev);
  if (auto code = fleet_commands.RunDaemon()) return *code;

  auto client = Client::FromEnv();
  if (!client.ok()) return Fail(client.status());
  Client& c = *client;

  if (auto code = egress_commands.Run(c, json)) return *code;
  if (auto code = fleet_commands.Run(c, json)) return *code;
  if (create->parsed()) {
    nlohmann::json body = {{"template", tmpl}};
    if (runtime != "ns") body["runtime"] = runtime;
    if (timeout > 0) body["timeout_s"] = timeout;
    if (!env.empty()) body["env"] = ParsePairs(env);
    if (!meta.empty()) body["metadata"] = ParsePairs(meta);
    if (!creds.empty()) body["credentials"] = creds;
    std::map<std::string, std::string> headers;
    for (const auto& p : egress_profiles) {
      headers["X-Space-Egress-Profile"] += (headers["X-Space-Egress-Profile"].empty() ? "" : ",") + p;
    }
    return PrintCall(
        c, "POST", no_wait ? "/v1/sandboxes" : "/v1/sandboxes?wait=true", body.dump(), json,
        [](const nlohmann::json& j) { std::cout << j["sandbox"].value("id", "") << "\n"; }, headers);
  }
  if (ls->parsed()) {
    return PrintCall(c, "GET", "/v1/sandboxes", "", json, [](const nlohmann::json& j) {
      std::printf("%-28s %-10s %-10s %s\n", "ID", "STATE", "TEMPLATE", "CREATED");
      for (const auto& s : j["sandboxes"]) {
        std::printf("%-28s %-10s %-10s %s\n", s.value("id", "").c_str(), s.value("state", "").c_str(),
                    s.value("template", "").c_str(), s.value("created_at", "").c_str());
      }
    });
  }
  if (inspect->parsed()) return PrintCall(c, "GET", "/v1/sandboxes/" + UrlEncode(id), "", true, nullptr);
  if (rm->parsed()) {
    return PrintCall(c, "DELETE", "/v1/sandboxes/" + UrlEncode(id) + "?wait=true", "", json, [](const nlohmann::json&) {});
  }
  if (logs->parsed()) {
    return PrintCall(c, "GET", "/v1/sandboxes/" + UrlEncode(id) + "/commands", "", json, [](const nlohmann::json& j) {
      for (const auto& cmd : j["commands"]) {
        std::string line;
        for (const auto& a : cmd["cmd"]) line += (line.empty() ? "" : " ") + a.get<std::string>();
        std::printf("%s %s exit=%s %s\n", cmd.value("started_at", "").c_str(), cmd.value("pid", "").c_str(),
                    cmd["exit_code"].is_null() ? "-" : std::to_string(cmd["exit_code"].get<int>()).c_str(), line.c_str());
      }
    });
  }
  if (exec->parsed()) {
    nlohmann::json body = {{"cmd", cmd}};
    if (!user.empty()) body["user"] = user;
    if (!cwd.empty()) body["cwd"] = cwd;
    if (!env.empty()) body["env"] = ParsePairs(env);
    if (timeout > 0) body["timeout_s"] = timeout;
    if (!::isatty(STDIN_FILENO)) {
      std::stringstream in;
      in << std::cin.rdbuf();
      if (!in.str().empty()) body["stdin_b64"] = Base64Encode(in.str());
    }
    int code = 1;
    Status st = c.Stream("POST", "/v1/sandboxes/" + UrlEncode(id) + "/exec", body.dump(), [&](const SseEvent& ev) {
      auto d = nlohmann::json::parse(ev.data, nullptr, false);
      if (!d.is_object()) return;
      FILE* out = ev.name == "stderr" ? stderr : stdout;
      if (ev.name == "stdout" || ev.name == "stderr") {
        std::string bytes = d.value("data", "");
        if (d.contains("data_b64")) bytes = Base64Decode(d.value("data_b64", "")).value();
        std::fwrite(bytes.data(), 1, bytes.size(), out);
        std::fflush(out);
      } else if (ev.name == "exit") {
        if (d["exit_code"].is_number_integer()) code = d["exit_code"].get<int>();
        else code = 128 + 9;
        if (d.value("timed_out", false)) std::cerr << "space: command timed out\n";
      } else if (ev.name == "error") {
        std::cerr << "space: " << d.value("message", "") << "\n";
      }
    });
    if (!st.ok()) return Fail(st);
    return code;
  }
  if (cp->parsed()) {
    auto [sid, spath] = SplitRemote(src);
    auto [did, dpath] = SplitRemote(dst);
    if (sid.empty() == did.empty()) return Fail(InvalidArgument("exactly one side of cp must be ID:/path"));
    if (!sid.empty()) {
      auto r = c.Call("GET", "/v1/sandboxes/" + UrlEncode(sid) + "/files?path=" + UrlEncode(spath));
      if (!r.ok()) return Fail(r.status());
      if (r->status >= 300) return Fail(ResponseError(*r));
      if (Status st = WriteFileAtomic(dpath, r->body, 0644); !st.ok()) return Fail(st);
      return 0;
    }
    auto data = ReadFileToString(spath, 100u << 20);
    if (!data.ok()) return Fail(data.status());
    if (!dpath.empty() && dpath.back() == '/') dpath += spath.substr(spath.rfind('/') + 1);
    auto r = c.Call("PUT", "/v1/sandboxes/" + UrlEncode(did) + "/files?path=" + UrlEncode(dpath), *data,
                    "application/octet-stream");
    if (!r.ok()) return Fail(r.status());
    if (r->status >= 300) return Fail(ResponseError(*r));
    return 0;
  }
  if (pause->parsed() || resume->parsed() || suspend->parsed()) {
    std::string verb = pause->parsed() ? "pause" : resume->parsed() ? "resume" : "suspend";
    return PrintCall(c, "POST", "/v1/sandboxes/" + UrlEncode(id) + "/" + verb + "?wait=true", "", json,
                     [](const nlohmann::json& j) { std::cout << j.value("state", "") << "\n"; });
  }
  if (snapshot->parsed()) {
    return PrintCall(c, "POST", "/v1/sandboxes/" + UrlEncode(id) + "/snapshots", nlohmann::json{{"label", label}}.dump(),
                     json, [](const nlohmann::json& j) { std::cout << j.value("id", "") << "\n"; });
  }
  if (snapshots->parsed()) {
    return PrintCall(c, "GET", "/v1/sandboxes/" + UrlEncode(id) + "/snapshots", "", json, [](const nlohmann::json& j) {
      for (const auto& s : j["snapshots"]) {
        std::printf("%-28s %-11s %-28s %s %s\n", s.value("id", "").c_str(), s.value("state", "").c_str(),
                    s["parent"].is_string() ? s["parent"].get<std::string>().c_str() : "-",
                    s.value("created_at", "").c_str(), s.value("label", "").c_str());
      }
    });
  }
  if (fork->parsed()) {
    nlohmann::json body = {{"count", count}};
    if (!snap.empty()) body["snapshot"] = snap;
    return PrintCall(c, "POST", "/v1/sandboxes/" + UrlEncode(id) + "/fork?wait=true", body.dump(), json,
                     [](const nlohmann::json& j) {
                       for (const auto& s : j["sandboxes"]) std::cout << s.value("id", "") << "\n";
                     });
  }
  if (rollback->parsed()) {
    return PrintCall(c, "POST", "/v1/sandboxes/" + UrlEncode(id) + "/rollback",
                     nlohmann::json{{"snapshot", snap}}.dump(), json,
                     [](const nlohmann::json& j) { std::cout << j.value("state", "") << "\n"; });
  }
  if (diff->parsed()) {
    return PrintCall(c, "GET", "/v1/snapshots/" + UrlEncode(snap) + "/diff?against=" + UrlEncode(against), "", json,
                     [](const nlohmann::json& j) {
                       for (const char* k : {"added", "changed", "removed"}) {
                         char mark = k[0] == 'a' ? '+' : k[0] == 'c' ? '~' : '-';
                         for (const auto& p : j[k]) std::cout << mark << " " << p.get<std::string>() << "\n";
                       }
                       if (j.value("truncated", false)) std::cout << "(truncated)\n";
                     });
  }
  if (tpl_ls->parsed()) {
    return PrintCall(c, "GET", "/v1/templates", "", json, [](const nlohmann::json& j) {
      for (const auto& t : j["templates"]) {
        std::printf("%-16s %s %12llu\n", t.value("name", "").c_str(), t.value("digest", "").c_str(),
                    static_cast<unsigned long long>(t.value("size_bytes", uint64_t{0})));
      }
    });
  }
  if (tpl_build->parsed() || tpl_import->parsed()) {
    nlohmann::json body = {{"name", name}};
    // The server reads the path on its own host: a relative one means this shell's directory
    // there (space dev on this machine).
    if (tpl_import->parsed()) body["source"] = src.empty() || src[0] == '/' ? src : std::filesystem::absolute(src).string();
    int code = 0;
    Status st = c.Stream("POST", "/v1/templates", body.dump(), [&](const SseEvent& ev) {
      auto d = nlohmann::json::parse(ev.data, nullptr, false);
      if (!d.is_object()) return;
      if (ev.name == "progress") std::cerr << d.value("line", "") << "\n";
      if (ev.name == "done") std::cout << d.value("name", "") << " " << d.value("digest", "") << "\n";
      if (ev.name == "error") {
        std::cerr << "space: " << d.value("message", "") << "\n";
        code = 1;
      }
    });
    if (!st.ok()) return Fail(st);
    return code;
  }
  return 2;
}

}  // namespace space::cli
