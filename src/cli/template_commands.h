// `space template build NAME -f Dockerfile|--recipe FILE [CONTEXT_DIR]` (a recipe build with
// live progress per step) and `space template rm NAME`: the client side of
// docs/templates.md. Thread-compatible.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "cli/client.h"

namespace space::cli {

struct RecipeBuildOptions {
  std::string name;
  std::string dockerfile;               // -f
  std::string recipe_file;              // --recipe (JSON)
  std::string context_dir;              // "" : the Dockerfile's directory when a COPY needs one
  std::vector<std::string> build_args;  // K=V
  std::vector<std::string> egress_profiles;
  bool no_cache = false;
};

// Builds, following the build's log; 0 once built, 1 otherwise.
int RunRecipeBuild(Client& c, const RecipeBuildOptions& opts);
int RemoveTemplate(Client& c, const std::string& name, bool force);

}  // namespace space::cli
