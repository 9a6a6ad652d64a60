// What a built template asks of each new sandbox: its config (node/recipe.h TemplateConfig),
// read from the template's read-only tree, and its `start` and `ready` commands, run through
// the sandbox's guest once it is up. Stateless functions; thread-safe.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "node/recipe.h"
#include "node/sandbox_io.h"
#include "store/sandbox.h"

namespace space::node {

// How long a create waits for `ready` to succeed.
inline constexpr int64_t kReadyTimeoutMs = 60000;

// The config a build left at <tree_dir>/.space-template.json; the default config when there is
// none (built-ins, imports). The file is opened without following a symlink and size-capped:
// a build's commands wrote that tree.
Result<TemplateConfig> ReadTemplateConfig(const std::string& tree_dir);

// Starts `config.start` in the background and runs `config.ready` until it succeeds (or
// kReadyTimeoutMs passes), both as `config.user` in `config.workdir`. Records their times in
// `steps`. The sandbox `rec` is running.
Status StartTemplateCommands(SandboxIo* io, const store::Sandbox& rec, const TemplateConfig& config,
                             nlohmann::json* steps);

}  // namespace space::node
