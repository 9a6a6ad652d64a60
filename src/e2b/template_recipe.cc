#include "e2b/template_recipe.h"

#include <vector>

#include "http/validate.h"
#include "storage/context_tar.h"

namespace space::e2b {
namespace {

using nlohmann::json;

std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

bool IsLowerHex64(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// A path the build resolves: absolute as it is, relative below the current workdir.
Result<std::string> Resolve(const std::string& path, const std::string& workdir, const std::string& what) {
  std::string p = path;
  if (p.empty() || p[0] != '/') {
    if (workdir.empty())
      return InvalidArgument(what + " '" + path.substr(0, 200) + "' is relative and no WORKDIR is set");
    p = workdir + (workdir.back() == '/' ? "" : "/") + path;
  }
  RETURN_IF_ERROR(node::ValidateAbsolutePath(p, what));
  return p;
}

node::RecipeStep Run(std::string command) {
  node::RecipeStep s;
  s.kind = node::StepKind::kRun;
  s.command = std::move(command);
  return s;
}

node::RecipeStep User(std::string user) {
  node::RecipeStep s;
  s.kind = node::StepKind::kUser;
  s.value = std::move(user);
  return s;
}

// The args of a step: strings, bounded.
Result<std::vector<std::string>> Args(const json& step, const std::string& where) {
  std::vector<std::string> out;
  auto it = step.find("args");
  if (it == step.end() || it->is_null()) return out;
  if (!it->is_array() || it->size() > 2 * node::kMaxStepEnv)
    return InvalidArgument(where + ": args must be a short array");
  for (const auto& a : *it) {
    if (!a.is_string()) return InvalidArgument(where + ": args must be strings");
    if (a.get_ref<const std::string&>().size() > node::kMaxCommandBytes)
      return InvalidArgument(where + ": an arg is too long");
    out.push_back(a.get<std::string>());
  }
  return out;
}

}  // namespace

Result<std::string> E2bBuildParent(const json& body) {
  if (!body.is_object()) return InvalidArgument("the build must be a JSON object");
  if (body.contains("fromImage") && !body["fromImage"].is_null()) {
    std::string image = body["fromImage"].is_string() ? body["fromImage"].get<std::string>() : "?";
    return InvalidArgument("fromImage ('" + image.substr(0, 100) +
                           "') is not supported: SPACE builds from a template (Template().fromTemplate('base')); an "
                           "image becomes a template with POST /v1/templates/import (docs/templates.md)");
  }
  ASSIGN_OR_RETURN(std::string from, api::GetString(body, "fromTemplate", "", 63));
  if (from.empty()) return InvalidArgument("fromTemplate is required (SPACE builds from a template)");
  if (!api::IsTemplateName(from)) return InvalidArgument("fromTemplate '" + from + "' is not a template name");
  return from;
}

Result<node::Recipe> RecipeFromE2bBuild(const json& body, const E2bBuildTarget& t) {
  ASSIGN_OR_RETURN(std::string from, E2bBuildParent(body));
  node::Recipe r;
  r.team = t.team;
  r.name = t.name;
  r.from = from;
  ASSIGN_OR_RETURN(r.no_cache, api::GetBool(body, "force", false));
  ASSIGN_OR_RETURN(r.start, api::GetString(body, "startCmd", "", node::kMaxCommandBytes));
  ASSIGN_OR_RETURN(r.ready, api::GetString(body, "readyCmd", "", node::kMaxCommandBytes));
  auto steps = body.find("steps");
  if (steps != body.end() && !steps->is_null() && !steps->is_array()) return InvalidArgument("steps must be an array");
  std::string user = t.parent_user.empty() ? "root" : t.parent_user;
  std::string workdir = t.parent_workdir;
  std::vector<std::string> tars;
  const size_t count = steps == body.end() || steps->is_null() ? 0 : steps->size();
  for (size_t i = 0; i < count; ++i) {
    const json& step = (*steps)[i];
    const std::string where = "step " + std::to_string(i + 1);
    if (!step.is_object()) return InvalidArgument(where + " must be an object");
    ASSIGN_OR_RETURN(std::string type, api::GetString(step, "type", "", 16));
    ASSIGN_OR_RETURN(std::vector<std::string> args, Args(step, where));
    ASSIGN_OR_RETURN(bool force, api::GetBool(step, "force", false));
    r.no_cache = r.no_cache || force;  // SPACE has no per-step cache bypass: the whole build runs
    if (type == "RUN") {
      if (args.empty() || args.size() > 2 || args[0].empty()) return InvalidArgument(where + " (RUN) needs a command");
      if (args.size() == 2 && !args[1].empty() && args[1] != user) {
        RETURN_IF_ERROR(node::ValidateUserName(args[1]).Annotate(where + " (RUN)"));
        r.steps.push_back(User(args[1]));
        r.steps.push_back(Run(args[0]));
        r.steps.push_back(User(user));  // the user is for this step only, as on E2B
      } else {
        r.steps.push_back(Run(args[0]));
      }
    } else if (type == "COPY") {
      if (args.size() < 2 || args.size() > 4) return InvalidArgument(where + " (COPY) needs src and dest");
      std::string src = args[0];
      if (src.find_first_of("*?[{") != std::string::npos) {
        return InvalidArgument(where + " (COPY): '" + src.substr(0, 200) +
                               "' is a glob; SPACE copies a named file or directory");
      }
      while (src.size() > 2 && src.compare(0, 2, "./") == 0) src.erase(0, 2);
      while (src.size() > 1 && src.back() == '/') src.pop_back();
      RETURN_IF_ERROR(node::ValidateContextPath(src, where + " (COPY) src"));
      ASSIGN_OR_RETURN(std::string dest, Resolve(args[1], workdir, where + " (COPY) dest"));
      ASSIGN_OR_RETURN(std::string hash, api::GetString(step, "filesHash", "", 64));
      if (!IsLowerHex64(hash)) return InvalidArgument(where + " (COPY) needs its filesHash");
      auto files = t.files.find(hash);
      if (files == t.files.end()) return InvalidArgument(where + " (COPY): its files (" + hash + ") were not uploaded");
      tars.push_back(files->second);
      node::RecipeStep s;
      s.kind = node::StepKind::kCopy;
      s.src = src;
      s.dest = dest;
      r.steps.push_back(s);
      // SPACE copies as root; E2B's files belong to the owner named, else the current user.
      std::string owner = args.size() > 2 && !args[2].empty() ? args[2] : (user == "root" ? "" : user);
      const std::string mode = args.size() > 3 ? args[3] : "";
      std::string fix;
      if (!owner.empty()) {
        RETURN_IF_ERROR(node::ValidateUserName(owner).Annotate(where + " (COPY) owner"));
        if (owner.find(':') == std::string::npos) owner += ":" + owner;
        fix = "chown -R " + Quote(owner) + " " + Quote(dest);
      }
      if (!mode.empty()) {
        if (mode.size() > 4 || mode.find_first_not_of("01234567") != std::string::npos) {
          return InvalidArgument(where + " (COPY): mode '" + mode.substr(0, 16) + "' is not octal");
        }
        fix += (fix.empty() ? "" : " && ") + std::string("chmod -R ") + mode + " " + Quote(dest);
      }
      if (!fix.empty()) {
        if (user != "root") r.steps.push_back(User("root"));
        r.steps.push_back(Run(fix));
        if (user != "root") r.steps.push_back(User(user));
      }
    } else if (type == "ENV") {
      if (args.empty() || args.size() % 2 != 0) return InvalidArgument(where + " (ENV) needs name and value pairs");
      node::RecipeStep s;
      s.kind = node::StepKind::kEnv;
      for (size_t k = 0; k < args.size(); k += 2) {
        if (!api::IsEnvName(args[k]))
          return InvalidArgument(where + " (ENV): '" + args[k].substr(0, 64) + "' is not a name");
        s.env[args[k]] = args[k + 1];
      }
      r.steps.push_back(s);
    } else if (type == "WORKDIR") {
      if (args.size() != 1) return InvalidArgument(where + " (WORKDIR) needs one path");
      ASSIGN_OR_RETURN(workdir, Resolve(args[0], workdir, where + " (WORKDIR)"));
      node::RecipeStep s;
      s.kind = node::StepKind::kWorkdir;
      s.value = workdir;
      r.steps.push_back(s);
    } else if (type == "USER") {
      if (args.empty() || args.size() > 2) return InvalidArgument(where + " (USER) needs one user");
      RETURN_IF_ERROR(node::ValidateUserName(args[0]).Annotate(where + " (USER)"));
      user = args[0];
      r.steps.push_back(User(user));
    } else {
      return InvalidArgument(where + ": step type '" + type.substr(0, 16) +
                             "' is not one SPACE builds (RUN, COPY, ENV, WORKDIR, USER)");
    }
    if (r.steps.size() > node::kMaxRecipeSteps) {
      return InvalidArgument("the build has more steps than SPACE's " + std::to_string(node::kMaxRecipeSteps));
    }
  }
  if (!tars.empty()) {
    ASSIGN_OR_RETURN(r.context, storage::ConcatTars(tars, node::kMaxContextBytes));
  }
  return r;
}

}  // namespace space::e2b
