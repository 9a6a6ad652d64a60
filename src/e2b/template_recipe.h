// The E2B SDK's template build (Template()...; Template.build) as a SPACE recipe: the body of
// POST /v2/templates/{templateID}/builds/{buildID} (steps RUN, COPY, ENV, WORKDIR, USER,
// fromTemplate, startCmd, readyCmd, force) becomes a node::Recipe that TemplateBuilds runs.
// What has no SPACE meaning (fromImage, a COPY glob) is refused with a message that says so.
// Pure and stateless: hostile JSON in, a bounded recipe or an invalid_argument out.
#pragma once

#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "node/recipe.h"

namespace space::e2b {

// The parent template a build body names (fromTemplate), checked; read first, so the caller
// can look up the parent's user and workdir.
Result<std::string> E2bBuildParent(const nlohmann::json& body);

struct E2bBuildTarget {
  std::string team;
  std::string name;            // the template to make
  std::string parent_user;     // the parent's configured user ("" root)
  std::string parent_workdir;  // and workdir ("" none)
  // The files of each COPY step, by its filesHash: tarballs, uncompressed.
  std::map<std::string, std::string> files;
};

// The recipe, its context the concatenation of the COPY steps' tarballs in step order.
// A RUN with a user (args[1]) runs as that user and then returns to the one before; a COPY's
// files belong to its owner (args[2]) or else to the current user, as on E2B; its mode
// (args[3]) is applied to what it copied.
Result<node::Recipe> RecipeFromE2bBuild(const nlohmann::json& body, const E2bBuildTarget& target);

}  // namespace space::e2b
