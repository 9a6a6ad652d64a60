#include "protocol/json_util.h"

namespace space::guest {
namespace {

// Maximum bracket depth outside string literals; stops counting once past `limit`.
int NestingDepth(std::string_view text, int limit) {
  int depth = 0;
  int max_depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) max_depth = depth;
      if (max_depth > limit) return max_depth;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return max_depth;
}

}  // namespace

Result<nlohmann::json> ParseJsonObject(std::string_view text, std::string_view what) {
  if (NestingDepth(text, kMaxJsonDepth) > kMaxJsonDepth) {
    return InvalidArgument(std::string(what) + ": JSON nested too deeply");
  }
  // allow_exceptions=false: a syntax error yields a discarded value instead of a throw.
  nlohmann::json j = nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument(std::string(what) + ": malformed JSON");
  if (!j.is_object()) return InvalidArgument(std::string(what) + ": JSON body must be an object");
  return j;
}

std::string DumpJson(const nlohmann::json& j) {
  try {
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  } catch (const std::exception&) {
    // Only allocation failure is left once invalid UTF-8 is replaced.
    return "{}";
  }
}

std::string ErrorJson(const Status& status) {
  nlohmann::json j = {{"code", std::string(StatusCodeWord(status.code()))}, {"message", status.message()}};
  return DumpJson(j);
}

}  // namespace space::guest
