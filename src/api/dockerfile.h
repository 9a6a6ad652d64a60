// A Dockerfile subset turned into a template recipe (POST /v1/templates, docs/templates.md):
// FROM (one stage; a template name or name@sha256:...), RUN, COPY and ADD of local files,
// ENV, WORKDIR, USER, ARG and CMD (the recipe's `start`). Anything else is refused with its
// line number, so a build never silently differs from what the file says. Pure; thread-safe.
#pragma once

#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace space::api {

// `build_args`: ARG values given on the command line (--build-arg K=V); they win over an
// ARG's default. $NAME and ${NAME} of a declared ARG are substituted in the instructions
// after it.
// Returns the recipe {"from", "steps", "start"?} (the caller adds "name").
Result<nlohmann::json> DockerfileToRecipe(const std::string& text,
                                          const std::map<std::string, std::string>& build_args);
// Does a recipe read the context (a copy step)?
bool RecipeNeedsContext(const nlohmann::json& recipe);

}  // namespace space::api
