// A template recipe after the API validated it, and the template config a build leaves in
// its tree.
//
// A recipe is a parent template plus ordered steps (run, env, workdir, user, copy from the
// build's context tarball) and the commands every sandbox of the template starts with
// (`start`) and waits for (`ready`). Each step's result is a layer, cached under
// StepCacheKey: the parent's digest and the step, so a changed step N reuses layers 1..N-1.
//
// What is not a file (env, workdir, user, start, ready) lives in the tree as well, in
// kTemplateConfigPath, so that a template's digest covers it and it travels with the tree.
// Plain values; the functions are pure and thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace space::node {

// Bounds on hostile recipes.
inline constexpr size_t kMaxRecipeSteps = 128;
inline constexpr size_t kMaxCommandBytes = 64 * 1024;  // a run, start or ready command
inline constexpr size_t kMaxPathBytes = 4096;
inline constexpr size_t kMaxContextBytes = 64u << 20;  // the uploaded context tarball
inline constexpr size_t kMaxStepEnv = 256;             // entries in one env step

// Where a built template keeps its config, relative to its root.
inline constexpr char kTemplateConfigPath[] = ".space-template.json";

enum class StepKind { kRun, kEnv, kWorkdir, kUser, kCopy };
const char* StepKindName(StepKind kind);

struct RecipeStep {
  StepKind kind = StepKind::kRun;
  std::string command;                     // run: a shell command line (sh -c)
  std::map<std::string, std::string> env;  // env
  std::string value;                       // workdir: an absolute path; user: a user name
  std::string src;                         // copy: a path in the context ("." for all of it)
  std::string dest;                        // copy: an absolute path in the tree
};

struct Recipe {
  std::string team;
  std::string name;           // the template to make
  std::string from = "base";  // the parent template
  std::string from_digest;    // "": its current digest; else exactly this one
  std::vector<RecipeStep> steps;
  std::string start;                         // "" none
  std::string ready;                         // "" none
  std::vector<std::string> egress_profiles;  // the steps' only network
  bool no_cache = false;                     // run every step even when a layer is cached
  std::string context;                       // an uncompressed tarball, "" none
};

// What a template carries besides files. The defaults (a template without the file) are
// empty: no extra env, the user's home, root, nothing started.
struct TemplateConfig {
  std::map<std::string, std::string> env;
  std::string workdir;
  std::string user;
  std::string start;
  std::string ready;

  bool operator==(const TemplateConfig&) const = default;
};

std::string EncodeTemplateConfig(const TemplateConfig& config);
// Hostile: the file lies in a tree a build's commands wrote. Bounded, typed, unknown keys ignored.
Result<TemplateConfig> ParseTemplateConfig(const std::string& text);

// The step as a canonical JSON object (the log, the cache key).
nlohmann::json StepJson(const RecipeStep& step);
// "sha256:<hex>" over the parent layer's digest, the step and, for a copy, the digest of what
// it copies (ContextDigest): equal keys make equal layers.
std::string StepCacheKey(const std::string& parent_digest, const RecipeStep& step, const std::string& copied_digest);
// The key of the last layer, which records `start` and `ready` in the config.
std::string FinalCacheKey(const std::string& parent_digest, const std::string& start, const std::string& ready);

// Applies a step's effect on the config (env, workdir, user); run and copy leave it.
void ApplyStepToConfig(const RecipeStep& step, TemplateConfig* config);

// Validation shared by the API and the CLI's Dockerfile reader.
// An absolute path without "..", NUL or empty components beyond a trailing slash.
Status ValidateAbsolutePath(const std::string& path, const std::string& what);
// A relative path inside the context: no leading '/', no "..", no NUL; "." is the whole context.
Status ValidateContextPath(const std::string& path, const std::string& what);
// A user name or uid[:gid] as exec takes it.
Status ValidateUserName(const std::string& user);

}  // namespace space::node
