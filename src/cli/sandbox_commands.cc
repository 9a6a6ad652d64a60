#include "cli/sandbox_commands.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <sstream>

#include "common/base64.h"
#include "common/syscall.h"

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

}  // namespace

void SandboxCommands::Register(CLI::App& app) {
  create_ = app.add_subcommand("create", "create a sandbox and print its id");
  create_->add_option("--template,-t", template_, "template name");
  create_->add_option("--runtime", runtime_, "ns (namespaces, default) or vm (a microVM with its own kernel)");
  create_->add_option("--timeout", timeout_, "seconds until the sandbox is destroyed");
  create_->add_option("--env,-e", env_, "K=V environment for every process");
  create_->add_option("--metadata,-m", meta_, "k=v metadata");
  create_->add_flag("--no-wait", no_wait_, "return once accepted, before it runs");
  create_->add_option("--egress", egress_profiles_, "egress profile (repeatable; none = no network)");
  create_->add_option("--cred", creds_, "credential whose placeholder the sandbox gets (repeatable)");
  create_->add_option("--volume,-v", volumes_,
                      "NAME:/path[:ro], a volume to mount (repeatable; `space volume create`)");

  ls_ = app.add_subcommand("ls", "list sandboxes");
  inspect_ = app.add_subcommand("inspect", "show a sandbox");
  inspect_->add_option("id", id_)->required();
  rm_ = app.add_subcommand("rm", "destroy a sandbox");
  rm_->add_option("id", id_)->required();
  logs_ = app.add_subcommand("logs", "list the commands run in a sandbox");
  logs_->add_option("id", id_)->required();

  exec_ = app.add_subcommand("exec", "run a command in a sandbox, streaming its output");
  exec_->add_option("id", id_)->required();
  exec_->add_option("--user,-u", user_, "user to run as (default root)");
  exec_->add_option("--cwd,-w", cwd_, "working directory");
  exec_->add_option("--env,-e", env_, "K=V");
  exec_->add_option("--timeout", timeout_, "seconds before the command is killed");
  exec_->add_option("cmd", cmd_, "command and arguments (after --)")->required();

  cp_ = app.add_subcommand("cp", "copy a file into or out of a sandbox (ID:/path)");
  cp_->add_option("src", src_)->required();
  cp_->add_option("dst", dst_)->required();

  pause_ = app.add_subcommand("pause", "freeze every process of a sandbox");
  pause_->add_option("id", id_)->required();
  resume_ = app.add_subcommand("resume", "thaw a paused sandbox, or bring a suspended one back");
  resume_->add_option("id", id_)->required();
  suspend_ = app.add_subcommand("suspend", "snapshot to the store, stop, and free the node's resources");
  suspend_->add_option("id", id_)->required();
  snapshot_ = app.add_subcommand("snapshot", "take a snapshot of a sandbox's files (prints its id)");
  snapshot_->add_option("id", id_)->required();
  snapshot_->add_option("--label,-l", label_, "a name for the snapshot");
  snapshots_ = app.add_subcommand("snapshots", "list a sandbox's snapshots");
  snapshots_->add_option("id", id_)->required();
  fork_ = app.add_subcommand("fork", "new sandboxes from a snapshot (default: one taken now)");
  fork_->add_option("id", id_)->required();
  fork_->add_option("--snapshot,-s", snap_, "snapshot to fork from");
  fork_->add_option("--count,-n", count_, "how many");
  rollback_ = app.add_subcommand("rollback", "return a sandbox's files to a snapshot");
  rollback_->add_option("id", id_)->required();
  rollback_->add_option("snapshot", snap_)->required();
  diff_ = app.add_subcommand("diff", "files added, changed and removed between two snapshots");
  diff_->add_option("snapshot", snap_)->required();
  diff_->add_option("against", against_)->required();

  auto* tpl = app.add_subcommand("template", "manage templates");
  tpl->require_subcommand(1);
  tpl_ls_ = tpl->add_subcommand("ls", "list templates");
  tpl_build_ = tpl->add_subcommand(
      "build", "build a template from a Dockerfile (-f) or a JSON recipe (--recipe), or a built-in (base, busybox)");
  tpl_build_->add_option("name", name_)->required();
  tpl_build_->add_option("context", recipe_.context_dir, "directory COPY and ADD read (default: the Dockerfile's)");
  tpl_build_->add_option("-f,--file", recipe_.dockerfile, "a Dockerfile (subset: docs/templates.md)");
  tpl_build_->add_option("--recipe", recipe_.recipe_file, "a JSON recipe (the POST /v1/templates body)");
  tpl_build_->add_option("--build-arg", recipe_.build_args, "ARG value K=V (repeatable)");
  tpl_build_->add_option("--egress", recipe_.egress_profiles, "egress profile the steps may use (repeatable)");
  tpl_build_->add_flag("--no-cache", recipe_.no_cache, "run every step, even those with a cached layer");
  tpl_rm_ = tpl->add_subcommand("rm", "remove a template (refused while a sandbox uses it, unless --force)");
  tpl_rm_->add_option("name", name_)->required();
  tpl_rm_->add_flag("--force", force_, "remove even while sandboxes use it");
  tpl_gc_ = tpl->add_subcommand("gc", "free the build layers no template name holds (the layer cache's steps)");
  tpl_import_ = tpl->add_subcommand("import", "import a directory or tarball (path on the server) as a template");
  tpl_import_->add_option("source", src_)->required();
  tpl_import_->add_option("name", name_)->required();
}

std::optional<int> SandboxCommands::Run(Client& c, bool json) {
  if (create_->parsed()) return Create(c, json);
  if (ls_->parsed()) {
    return PrintCall(c, "GET", "/v1/sandboxes", "", json, [](const nlohmann::json& j) {
      std::printf("%-28s %-10s %-10s %s\n", "ID", "STATE", "TEMPLATE", "CREATED");
      for (const auto& s : j["sandboxes"]) {
        std::printf("%-28s %-10s %-10s %s\n", s.value("id", "").c_str(), s.value("state", "").c_str(),
                    s.value("template", "").c_str(), s.value("created_at", "").c_str());
      }
    });
  }
  if (inspect_->parsed()) return PrintCall(c, "GET", "/v1/sandboxes/" + UrlEncode(id_), "", true, nullptr);
  if (rm_->parsed()) {
    return PrintCall(c, "DELETE", "/v1/sandboxes/" + UrlEncode(id_) + "?wait=true", "", json,
                     [](const nlohmann::json&) {});
  }
  if (logs_->parsed()) {
    return PrintCall(c, "GET", "/v1/sandboxes/" + UrlEncode(id_) + "/commands", "", json, [](const nlohmann::json& j) {
      for (const auto& cmd : j["commands"]) {
        std::string line;
        for (const auto& a : cmd["cmd"]) line += (line.empty() ? "" : " ") + a.get<std::string>();
        std::printf("%s %s exit=%s %s\n", cmd.value("started_at", "").c_str(), cmd.value("pid", "").c_str(),
                    cmd["exit_code"].is_null() ? "-" : std::to_string(cmd["exit_code"].get<int>()).c_str(), line.c_str());
      }
    });
  }
  if (exec_->parsed()) return Exec(c);
  if (cp_->parsed()) return Copy(c);
  if (pause_->parsed() || resume_->parsed() || suspend_->parsed()) {
    std::string verb = pause_->parsed() ? "pause" : resume_->parsed() ? "resume" : "suspend";
    return PrintCall(c, "POST", "/v1/sandboxes/" + UrlEncode(id_) + "/" + verb + "?wait=true", "", json,
                     [](const nlohmann::json& j) { std::cout << j.value("state", "") << "\n"; });
  }
  if (snapshot_->parsed()) {
    return PrintCall(c, "POST", "/v1/sandboxes/" + UrlEncode(id_) + "/snapshots",
                     nlohmann::json{{"label", label_}}.dump(), json,
                     [](const nlohmann::json& j) { std::cout << j.value("id", "") << "\n"; });
  }
  if (snapshots_->parsed()) {
    return PrintCall(c, "GET", "/v1/sandboxes/" + UrlEncode(id_) + "/snapshots", "", json, [](const nlohmann::json& j) {
      for (const auto& s : j["snapshots"]) {
        std::printf("%-28s %-11s %-28s %s %s\n", s.value("id", "").c_str(), s.value("state", "").c_str(),
                    s["parent"].is_string() ? s["parent"].get<std::string>().c_str() : "-",
                    s.value("created_at", "").c_str(), s.value("label", "").c_str());
      }
    });
  }
  if (fork_->parsed()) {
    nlohmann::json body = {{"count", count_}};
    if (!snap_.empty()) body["snapshot"] = snap_;
    return PrintCall(c, "POST", "/v1/sandboxes/" + UrlEncode(id_) + "/fork?wait=true", body.dump(), json,
                     [](const nlohmann::json& j) {
                       for (const auto& s : j["sandboxes"]) std::cout << s.value("id", "") << "\n";
                     });
  }
  if (rollback_->parsed()) {
    return PrintCall(c, "POST", "/v1/sandboxes/" + UrlEncode(id_) + "/rollback",
                     nlohmann::json{{"snapshot", snap_}}.dump(), json,
                     [](const nlohmann::json& j) { std::cout << j.value("state", "") << "\n"; });
  }
  if (diff_->parsed()) {
    return PrintCall(c, "GET", "/v1/snapshots/" + UrlEncode(snap_) + "/diff?against=" + UrlEncode(against_), "", json,
                     [](const nlohmann::json& j) {
                       for (const char* k : {"added", "changed", "removed"}) {
                         char mark = k[0] == 'a' ? '+' : k[0] == 'c' ? '~' : '-';
                         for (const auto& p : j[k]) std::cout << mark << " " << p.get<std::string>() << "\n";
                       }
                       if (j.value("truncated", false)) std::cout << "(truncated)\n";
                     });
  }
  if (tpl_ls_->parsed()) {
    return PrintCall(c, "GET", "/v1/templates", "", json, [](const nlohmann::json& j) {
      for (const auto& t : j["templates"]) {
        std::printf("%-16s %s %12llu\n", t.value("name", "").c_str(), t.value("digest", "").c_str(),
                    static_cast<unsigned long long>(t.value("size_bytes", uint64_t{0})));
      }
    });
  }
  if (tpl_rm_->parsed()) return RemoveTemplate(c, name_, force_);
  if (tpl_gc_->parsed()) {
    return PrintCall(c, "POST", "/v1/templates/gc", "{}", json,
                     [](const nlohmann::json& j) { std::cout << j.value("layers_removed", 0) << " layers removed\n"; });
  }
  if (tpl_build_->parsed() && (!recipe_.dockerfile.empty() || !recipe_.recipe_file.empty())) {
    recipe_.name = name_;
    return RunRecipeBuild(c, recipe_);
  }
  if (tpl_build_->parsed() && !recipe_.context_dir.empty()) {
    std::cerr << "space: a context directory goes with -f Dockerfile or --recipe FILE\n";
    return 1;
  }
  if (tpl_build_->parsed() || tpl_import_->parsed()) return BuildTemplate(c);
  return std::nullopt;
}

int SandboxCommands::Create(Client& c, bool json) {
  nlohmann::json body = {{"template", template_}};
  if (runtime_ != "ns") body["runtime"] = runtime_;
  if (timeout_ > 0) body["timeout_s"] = timeout_;
  if (!env_.empty()) body["env"] = ParsePairs(env_);
  if (!meta_.empty()) body["metadata"] = ParsePairs(meta_);
  if (!creds_.empty()) body["credentials"] = creds_;
  for (const std::string& v : volumes_) {
    // NAME:/path or NAME:/path:ro; the server validates the name and the path.
    const size_t colon = v.find(':');
    if (colon == std::string::npos) return Fail(InvalidArgument("--volume " + v + ": want NAME:/path[:ro]"));
    std::string path = v.substr(colon + 1);
    bool read_only = false;
    if (path.size() > 3 && path.compare(path.size() - 3, 3, ":ro") == 0) {
      read_only = true;
      path.resize(path.size() - 3);
    }
    body["volumes"].push_back({{"name", v.substr(0, colon)}, {"path", path}, {"read_only", read_only}});
  }
  std::map<std::string, std::string> headers;
  for (const auto& p : egress_profiles_) {
    headers["X-Space-Egress-Profile"] += (headers["X-Space-Egress-Profile"].empty() ? "" : ",") + p;
  }
  return PrintCall(
      c, "POST", no_wait_ ? "/v1/sandboxes" : "/v1/sandboxes?wait=true", body.dump(), json,
      [](const nlohmann::json& j) { std::cout << j["sandbox"].value("id", "") << "\n"; }, headers);
}

int SandboxCommands::Exec(Client& c) {
  nlohmann::json body = {{"cmd", cmd_}};
  if (!user_.empty()) body["user"] = user_;
  if (!cwd_.empty()) body["cwd"] = cwd_;
  if (!env_.empty()) body["env"] = ParsePairs(env_);
  if (timeout_ > 0) body["timeout_s"] = timeout_;
  if (!::isatty(STDIN_FILENO)) {
    std::stringstream in;
    in << std::cin.rdbuf();
    if (!in.str().empty()) body["stdin_b64"] = Base64Encode(in.str());
  }
  int code = 1;
  Status st = c.Stream("POST", "/v1/sandboxes/" + UrlEncode(id_) + "/exec", body.dump(), [&](const SseEvent& ev) {
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

int SandboxCommands::Copy(Client& c) {
  auto [sid, spath] = SplitRemote(src_);
  auto [did, dpath] = SplitRemote(dst_);
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

int SandboxCommands::BuildTemplate(Client& c) {
  nlohmann::json body = {{"name", name_}};
  // The server reads the path on its own host: a relative one means this shell's directory
  // there (space dev on this machine).
  if (tpl_import_->parsed()) {
    body["source"] = src_.empty() || src_[0] == '/' ? src_ : std::filesystem::absolute(src_).string();
  }
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

}  // namespace space::cli
