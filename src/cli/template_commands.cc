#include "cli/template_commands.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>

#include "api/dockerfile.h"
#include "common/random.h"
#include "common/subprocess.h"
#include "common/syscall.h"
#include "common/unique_fd.h"

namespace space::cli {
namespace {

constexpr size_t kMaxContextBytes = 64u << 20;  // the server's cap (node/recipe.h)

int Fail(const Status& st) {
  std::cerr << "space: " << st.message() << "\n";
  return 1;
}

// CONTEXT_DIR as an uncompressed tarball, made by tar (numeric owners: the server copies files
// as root anyway).
Result<std::string> TarContext(const std::string& dir) {
  int mfd = ::memfd_create("space-context", MFD_CLOEXEC);
  if (mfd < 0) return ErrnoStatus("memfd_create", "space-context", errno);
  UniqueFd out(mfd);
  SubprocessSpec spec;
  spec.argv = {"/usr/bin/tar", "--numeric-owner", "-C", dir, "-cf", "-", "."};
  spec.stdout_fd = out.get();
  RETURN_IF_ERROR(RunProcess(spec, [](const std::string& line) { std::cerr << line << "\n"; }));
  off_t size = ::lseek(out.get(), 0, SEEK_END);
  if (size < 0) return ErrnoStatus("lseek", "space-context", errno);
  if (static_cast<size_t>(size) > kMaxContextBytes) {
    return InvalidArgument("the context " + dir + " is larger than 64 MiB as a tarball");
  }
  std::string data(static_cast<size_t>(size), '\0');
  if (::pread(out.get(), data.data(), data.size(), 0) != size) return ErrnoStatus("pread", "space-context", errno);
  return data;
}

std::string Multipart(const std::string& boundary, const std::string& recipe, const std::string& context) {
  std::string body = "--" + boundary + "\r\nContent-Disposition: form-data; name=\"recipe\"\r\n" +
                     "Content-Type: application/json\r\n\r\n" + recipe + "\r\n";
  if (!context.empty()) {
    body += "--" + boundary + "\r\nContent-Disposition: form-data; name=\"context\"; filename=\"context.tar\"\r\n" +
            "Content-Type: application/x-tar\r\n\r\n" + context + "\r\n";
  }
  return body + "--" + boundary + "--\r\n";
}

}  // namespace

int RunRecipeBuild(Client& c, const RecipeBuildOptions& o) {
  nlohmann::json recipe;
  bool needs_context = false;
  std::string default_context = ".";
  if (!o.dockerfile.empty()) {
    auto text = ReadFileToString(o.dockerfile, 1 << 20);
    if (!text.ok()) return Fail(text.status());
    std::map<std::string, std::string> args;
    for (const auto& kv : o.build_args) {
      size_t eq = kv.find('=');
      args[kv.substr(0, eq)] = eq == std::string::npos ? "" : kv.substr(eq + 1);
    }
    auto r = api::DockerfileToRecipe(*text, args);
    if (!r.ok()) return Fail(r.status());
    recipe = std::move(*r);
    needs_context = api::RecipeNeedsContext(recipe);
    default_context = std::filesystem::path(o.dockerfile).parent_path().string();
    if (default_context.empty()) default_context = ".";
  } else {
    auto text = ReadFileToString(o.recipe_file, 1 << 20);
    if (!text.ok()) return Fail(text.status());
    recipe = nlohmann::json::parse(*text, nullptr, false);
    if (!recipe.is_object()) return Fail(InvalidArgument(o.recipe_file + " is not a JSON object"));
    needs_context = true;  // sent when given or when a copy step may need it
    if (o.context_dir.empty()) needs_context = false;
  }
  recipe["name"] = o.name;
  if (!o.egress_profiles.empty()) recipe["egress_profiles"] = o.egress_profiles;
  if (o.no_cache) recipe["no_cache"] = true;
  std::string context;
  if (needs_context || !o.context_dir.empty()) {
    auto tar = TarContext(o.context_dir.empty() ? default_context : o.context_dir);
    if (!tar.ok()) return Fail(tar.status());
    context = std::move(*tar);
  }
  const std::string boundary = "space-" + RandomHex(16);
  auto r = c.Call("POST", "/v1/templates", Multipart(boundary, recipe.dump(), context),
                  "multipart/form-data; boundary=" + boundary);
  if (!r.ok()) return Fail(r.status());
  if (r->status >= 300) return Fail(ResponseError(*r));
  auto accepted = nlohmann::json::parse(r->body, nullptr, false);
  if (!accepted.is_object() || !accepted.contains("operation")) return Fail(Internal("unexpected answer: " + r->body));
  const std::string op = accepted["operation"].value("id", "");
  std::cerr << "building " << o.name << " (" << op << ")\n";
  int code = 1;
  bool ended = false;
  Status st = c.Stream(
      "GET", "/v1/templates/" + UrlEncode(o.name) + "/builds/" + UrlEncode(op) + "/logs", "", [&](const SseEvent& ev) {
        auto d = nlohmann::json::parse(ev.data, nullptr, false);
        if (!d.is_object()) return;
        if (ev.name == "log") {
          std::string data = d.value("data", "");
          std::fwrite(data.data(), 1, data.size(), stderr);
        } else if (ev.name == "step") {
          std::string state = d.value("state", "");
          if (state == "layer") return;
          std::fprintf(stderr, "[%s/%s] %s %s%s\n", d["step"].dump().c_str(),
                       d.value("of", nlohmann::json(0)).dump().c_str(), d.value("kind", "").c_str(), state.c_str(),
                       d.contains("exit_code") && !d["exit_code"].is_null()
                           ? (" (exit code " + d["exit_code"].dump() + ")").c_str()
                           : "");
        } else if (ev.name == "done") {
          std::cout << d.value("name", "") << " " << d.value("digest", "") << "\n";
          code = 0;
          ended = true;
        } else if (ev.name == "error") {
          std::cerr << "space: " << d.value("message", "") << "\n";
          ended = true;
        }
      });
  if (!st.ok()) return Fail(st);
  if (!ended) return Fail(Unavailable("the build log ended early; see GET /v1/operations/" + op));
  return code;
}

int RemoveTemplate(Client& c, const std::string& name, bool force) {
  auto r = c.Call("DELETE", "/v1/templates/" + UrlEncode(name) + (force ? "?force=true" : ""));
  if (!r.ok()) return Fail(r.status());
  if (r->status >= 300) return Fail(ResponseError(*r));
  return 0;
}

}  // namespace space::cli
