// POST /v1/templates with a recipe: the JSON body, or a multipart/form-data body whose
// "recipe" part is that JSON and whose "context" part is the tarball copy steps read, becomes
// a typed node::Recipe. Also the "name@sha256:<hex>" template references creates and recipes
// take. Parsing only; stateless and thread-safe.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "http/http.h"
#include "node/recipe.h"

namespace space::api {

struct TemplateRef {
  std::string name;
  std::string digest;  // "" when the reference names no digest
};
// "name" or "name@sha256:<64 lowercase hex>".
Result<TemplateRef> ParseTemplateRef(const std::string& ref);

// Does this POST /v1/templates body ask for a recipe build (a multipart body, or any recipe
// field), rather than a built-in build or a server-side import?
bool IsRecipeRequest(const Request& req, const nlohmann::json* body);

// The recipe in `req` for `team`. invalid_argument names the first problem (a step by its
// index); payload_too_large for a context over node::kMaxContextBytes.
Result<node::Recipe> ParseRecipeRequest(const Request& req);
// The same over the JSON part alone (`context` is the uploaded tarball, "" none).
Result<node::Recipe> ParseRecipeJson(const nlohmann::json& body, std::string context);

}  // namespace space::api
