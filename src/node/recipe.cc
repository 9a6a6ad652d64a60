#include "node/recipe.h"

#include "storage/digest.h"

namespace space::node {
namespace {

constexpr size_t kMaxConfigEnv = 4096;

bool HasDotDot(const std::string& path) {
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string::npos) slash = path.size();
    if (path.compare(start, slash - start, "..") == 0 && slash - start == 2) return true;
    start = slash + 1;
  }
  return false;
}

Result<std::string> StringField(const nlohmann::json& doc, const char* key, size_t max) {
  auto it = doc.find(key);
  if (it == doc.end() || it->is_null()) return std::string();
  if (!it->is_string()) return InvalidArgument(std::string("template config: '") + key + "' is not a string");
  std::string value = it->get<std::string>();
  if (value.size() > max) return InvalidArgument(std::string("template config: '") + key + "' is too long");
  return value;
}

}  // namespace

const char* StepKindName(StepKind kind) {
  switch (kind) {
    case StepKind::kRun:
      return "run";
    case StepKind::kEnv:
      return "env";
    case StepKind::kWorkdir:
      return "workdir";
    case StepKind::kUser:
      return "user";
    case StepKind::kCopy:
      return "copy";
  }
  return "run";
}

std::string EncodeTemplateConfig(const TemplateConfig& c) {
  nlohmann::json j = {{"env", c.env}, {"workdir", c.workdir}, {"user", c.user}, {"start", c.start}, {"ready", c.ready}};
  return j.dump(1) + "\n";
}

Result<TemplateConfig> ParseTemplateConfig(const std::string& text) {
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) return InvalidArgument("template config is not a JSON object");
  TemplateConfig c;
  ASSIGN_OR_RETURN(c.workdir, StringField(doc, "workdir", kMaxPathBytes));
  ASSIGN_OR_RETURN(c.user, StringField(doc, "user", 256));
  ASSIGN_OR_RETURN(c.start, StringField(doc, "start", kMaxCommandBytes));
  ASSIGN_OR_RETURN(c.ready, StringField(doc, "ready", kMaxCommandBytes));
  auto env = doc.find("env");
  if (env != doc.end() && !env->is_null()) {
    if (!env->is_object() || env->size() > kMaxConfigEnv) return InvalidArgument("template config: bad 'env'");
    for (const auto& [k, v] : env->items()) {
      if (!v.is_string() || k.empty() || k.size() > 256 || k.find('=') != std::string::npos ||
          v.get<std::string>().size() > 32768) {
        return InvalidArgument("template config: bad env entry");
      }
      c.env[k] = v.get<std::string>();
    }
  }
  return c;
}

nlohmann::json StepJson(const RecipeStep& s) {
  switch (s.kind) {
    case StepKind::kRun:
      return {{"run", s.command}};
    case StepKind::kEnv:
      return {{"env", s.env}};
    case StepKind::kWorkdir:
      return {{"workdir", s.value}};
    case StepKind::kUser:
      return {{"user", s.value}};
    case StepKind::kCopy:
      return {{"copy", {{"src", s.src}, {"dest", s.dest}}}};
  }
  return nlohmann::json::object();
}

std::string StepCacheKey(const std::string& parent_digest, const RecipeStep& step, const std::string& copied_digest) {
  // nlohmann's dump sorts object keys, so the text is canonical.
  nlohmann::json j = {{"v", 1}, {"parent", parent_digest}, {"step", StepJson(step)}, {"copied", copied_digest}};
  return storage::Sha256Hex(j.dump());
}

std::string FinalCacheKey(const std::string& parent_digest, const std::string& start, const std::string& ready) {
  nlohmann::json j = {{"v", 1}, {"parent", parent_digest}, {"start", start}, {"ready", ready}};
  return storage::Sha256Hex(j.dump());
}

void ApplyStepToConfig(const RecipeStep& step, TemplateConfig* config) {
  switch (step.kind) {
    case StepKind::kEnv:
      for (const auto& [k, v] : step.env) config->env[k] = v;
      break;
    case StepKind::kWorkdir:
      config->workdir = step.value;
      break;
    case StepKind::kUser:
      config->user = step.value;
      break;
    case StepKind::kRun:
    case StepKind::kCopy:
      break;
  }
}

Status ValidateAbsolutePath(const std::string& path, const std::string& what) {
  if (path.empty() || path[0] != '/') return InvalidArgument(what + " must be an absolute path");
  if (path.size() > kMaxPathBytes) return InvalidArgument(what + " is longer than 4096 bytes");
  if (path.find('\0') != std::string::npos) return InvalidArgument(what + " holds a NUL byte");
  if (HasDotDot(path)) return InvalidArgument(what + " must not contain '..'");
  return Status::Ok();
}

Status ValidateContextPath(const std::string& path, const std::string& what) {
  if (path.empty()) return InvalidArgument(what + " is empty");
  if (path[0] == '/') return InvalidArgument(what + " must be relative to the context");
  if (path.size() > kMaxPathBytes) return InvalidArgument(what + " is longer than 4096 bytes");
  if (path.find('\0') != std::string::npos) return InvalidArgument(what + " holds a NUL byte");
  if (HasDotDot(path)) return InvalidArgument(what + " must not contain '..'");
  return Status::Ok();
}

Status ValidateUserName(const std::string& user) {
  if (user.empty() || user.size() > 64) return InvalidArgument("user must be 1..64 characters");
  for (char c : user) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                    c == '-' || c == '.' || c == ':';
    if (!ok) return InvalidArgument("user '" + user + "' holds a character other than [A-Za-z0-9_.:-]");
  }
  if (user[0] == '-') return InvalidArgument("user must not start with '-'");
  return Status::Ok();
}

}  // namespace space::node
