#include "api/recipe_request.h"

#include "api/dockerfile.h"
#include "e2b/multipart.h"
#include "http/validate.h"

namespace space::api {
namespace {

constexpr size_t kMaxRecipeJsonBytes = 1 << 20;

bool IsLowerHex(const std::string& s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

Result<std::string> BoundedString(const nlohmann::json& v, const std::string& what, size_t max) {
  if (!v.is_string()) return InvalidArgument(what + " must be a string");
  std::string s = v.get<std::string>();
  if (s.empty()) return InvalidArgument(what + " must not be empty");
  if (s.size() > max) return InvalidArgument(what + " is longer than " + std::to_string(max) + " bytes");
  if (s.find('\0') != std::string::npos) return InvalidArgument(what + " holds a NUL byte");
  return s;
}

Result<node::RecipeStep> ParseStep(const nlohmann::json& j, const std::string& where, bool have_context) {
  if (!j.is_object() || j.size() != 1) {
    return InvalidArgument(where + " must be an object with one of run, env, workdir, user, copy");
  }
  node::RecipeStep s;
  auto first = j.begin();
  const std::string& key = first.key();
  const nlohmann::json& v = first.value();
  if (key == "run") {
    s.kind = node::StepKind::kRun;
    ASSIGN_OR_RETURN(s.command, BoundedString(v, where + ".run", node::kMaxCommandBytes));
  } else if (key == "env") {
    s.kind = node::StepKind::kEnv;
    ASSIGN_OR_RETURN(s.env, GetStringMap(j, "env", node::kMaxStepEnv, 256, 32768, IsEnvName));
    if (s.env.empty()) return InvalidArgument(where + ".env must name at least one variable");
  } else if (key == "workdir") {
    s.kind = node::StepKind::kWorkdir;
    ASSIGN_OR_RETURN(s.value, BoundedString(v, where + ".workdir", node::kMaxPathBytes));
    RETURN_IF_ERROR(node::ValidateAbsolutePath(s.value, where + ".workdir"));
  } else if (key == "user") {
    s.kind = node::StepKind::kUser;
    ASSIGN_OR_RETURN(s.value, BoundedString(v, where + ".user", 64));
    RETURN_IF_ERROR(node::ValidateUserName(s.value));
  } else if (key == "copy") {
    s.kind = node::StepKind::kCopy;
    if (!v.is_object()) return InvalidArgument(where + ".copy must be an object {src, dest}");
    RETURN_IF_ERROR(CheckKnownFields(v, {"src", "dest"}));
    if (!v.contains("src") || !v.contains("dest")) return InvalidArgument(where + ".copy needs src and dest");
    ASSIGN_OR_RETURN(s.src, BoundedString(v["src"], where + ".copy.src", node::kMaxPathBytes));
    ASSIGN_OR_RETURN(s.dest, BoundedString(v["dest"], where + ".copy.dest", node::kMaxPathBytes));
    RETURN_IF_ERROR(node::ValidateContextPath(s.src, where + ".copy.src"));
    RETURN_IF_ERROR(node::ValidateAbsolutePath(s.dest, where + ".copy.dest"));
    if (!have_context) return InvalidArgument(where + ".copy needs a context tarball (a multipart 'context' part)");
  } else {
    return InvalidArgument(where + ": unknown step '" + key.substr(0, 64) + "' (run, env, workdir, user, copy)");
  }
  return s;
}

}  // namespace

Result<TemplateRef> ParseTemplateRef(const std::string& ref) {
  TemplateRef out;
  size_t at = ref.find('@');
  out.name = ref.substr(0, at);
  if (!IsTemplateName(out.name)) return InvalidArgument("template name '" + out.name.substr(0, 80) + "' is not valid");
  if (at == std::string::npos) return out;
  out.digest = ref.substr(at + 1);
  if (out.digest.size() != 71 || out.digest.compare(0, 7, "sha256:") != 0 || !IsLowerHex(out.digest.substr(7))) {
    return InvalidArgument("a template digest must be sha256:<64 lowercase hex digits>");
  }
  return out;
}

bool IsRecipeRequest(const Request& req, const nlohmann::json* body) {
  if (req.Header("content-type").rfind("multipart/form-data", 0) == 0) return true;
  if (body == nullptr || !body->is_object()) return false;
  for (const char* k : {"from", "steps", "start", "ready", "egress_profiles", "no_cache", "dockerfile"}) {
    if (body->contains(k)) return true;
  }
  return false;
}

namespace {

// A recipe given as {"dockerfile": "...", "build_args": {...}} instead of from/steps/start:
// the same recipe the CLI's `space template build -f` sends (dockerfile.h).
Result<nlohmann::json> ExpandDockerfile(const nlohmann::json& b) {
  for (const char* k : {"from", "steps", "start"}) {
    if (b.contains(k)) return InvalidArgument(std::string("give 'dockerfile' or '") + k + "', not both");
  }
  ASSIGN_OR_RETURN(std::string text, GetString(b, "dockerfile", "", kMaxRecipeJsonBytes));
  ASSIGN_OR_RETURN(auto args, GetStringMap(b, "build_args", 64, 128, 4096, IsEnvName));
  ASSIGN_OR_RETURN(nlohmann::json recipe, DockerfileToRecipe(text, args));
  nlohmann::json out = b;
  out.erase("dockerfile");
  out.erase("build_args");
  for (auto& [k, v] : recipe.items()) out[k] = v;
  return out;
}

}  // namespace

Result<node::Recipe> ParseRecipeJson(const nlohmann::json& body, std::string context) {
  if (!body.is_object()) return InvalidArgument("the recipe must be a JSON object");
  RETURN_IF_ERROR(CheckKnownFields(
      body, {"name", "from", "steps", "start", "ready", "egress_profiles", "no_cache", "dockerfile", "build_args"}));
  nlohmann::json expanded;
  if (body.contains("dockerfile")) {
    ASSIGN_OR_RETURN(expanded, ExpandDockerfile(body));
  } else if (body.contains("build_args")) {
    return InvalidArgument("'build_args' goes with 'dockerfile'");
  }
  const nlohmann::json& b = body.contains("dockerfile") ? expanded : body;
  node::Recipe r;
  if (!b.contains("name")) return InvalidArgument("field 'name' is required");
  ASSIGN_OR_RETURN(r.name, GetString(b, "name", "", 63));
  if (!IsTemplateName(r.name)) return InvalidArgument("field 'name' must match [a-z0-9][a-z0-9._-]{0,62}");
  ASSIGN_OR_RETURN(std::string from, GetString(b, "from", "base", 140));
  ASSIGN_OR_RETURN(TemplateRef parent, ParseTemplateRef(from));
  r.from = parent.name;
  r.from_digest = parent.digest;
  if (r.from == r.name && r.from_digest.empty()) {
    return InvalidArgument("a template cannot be built from itself without a digest (from: name@sha256:...)");
  }
  r.context = std::move(context);
  auto steps = b.find("steps");
  if (steps != b.end() && !steps->is_null()) {
    if (!steps->is_array()) return InvalidArgument("field 'steps' must be an array");
    if (steps->size() > node::kMaxRecipeSteps) return InvalidArgument("a recipe has at most 128 steps");
    for (size_t i = 0; i < steps->size(); ++i) {
      ASSIGN_OR_RETURN(node::RecipeStep s,
                       ParseStep((*steps)[i], "steps[" + std::to_string(i) + "]", !r.context.empty()));
      r.steps.push_back(std::move(s));
    }
  }
  ASSIGN_OR_RETURN(r.start, GetString(b, "start", "", node::kMaxCommandBytes));
  ASSIGN_OR_RETURN(r.ready, GetString(b, "ready", "", node::kMaxCommandBytes));
  ASSIGN_OR_RETURN(r.egress_profiles, GetStringList(b, "egress_profiles", 16, 63));
  for (const auto& p : r.egress_profiles) {
    if (!IsTemplateName(p)) return InvalidArgument("egress profile names must match [a-z0-9][a-z0-9._-]{0,62}");
  }
  ASSIGN_OR_RETURN(r.no_cache, GetBool(b, "no_cache", false));
  return r;
}

Result<node::Recipe> ParseRecipeRequest(const Request& req) {
  std::string json_text = req.body;
  std::string context;
  const std::string ct = req.Header("content-type");
  if (ct.rfind("multipart/form-data", 0) == 0) {
    ASSIGN_OR_RETURN(std::string boundary, e2b::MultipartBoundary(ct));
    ASSIGN_OR_RETURN(std::vector<e2b::Part> parts, e2b::ParseMultipart(req.body, boundary));
    bool have_recipe = false;
    for (const auto& p : parts) {
      if (p.name == "recipe") {
        if (p.data.size() > kMaxRecipeJsonBytes) return PayloadTooLarge("the recipe part is larger than 1 MiB");
        json_text = std::string(p.data);
        have_recipe = true;
      } else if (p.name == "context") {
        if (p.data.size() > node::kMaxContextBytes) return PayloadTooLarge("the context is larger than 64 MiB");
        context = std::string(p.data);
      } else {
        return InvalidArgument("unknown multipart part '" + p.name.substr(0, 64) + "' (recipe, context)");
      }
    }
    if (!have_recipe) return InvalidArgument("a multipart body needs a 'recipe' part (the JSON recipe)");
  } else if (json_text.size() > kMaxRecipeJsonBytes) {
    return PayloadTooLarge("a recipe is at most 1 MiB of JSON");
  }
  ASSIGN_OR_RETURN(nlohmann::json b, ParseObject(json_text));
  ASSIGN_OR_RETURN(node::Recipe r, ParseRecipeJson(b, std::move(context)));
  r.team = req.team;
  if (req.Query("no_cache") == "true" || req.Query("no_cache") == "1") r.no_cache = true;
  return r;
}

}  // namespace space::api
