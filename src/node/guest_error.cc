#include "node/guest_error.h"

#include <nlohmann/json.hpp>

namespace space::node {

Status GuestErrorStatus(const std::string& payload, std::string_view fallback, std::initializer_list<StatusCode> allowed) {
  auto j = nlohmann::json::parse(payload, nullptr, false);
  std::string msg(fallback);
  StatusCode code = StatusCode::kInternal;
  if (j.is_object() && j.contains("message") && j["message"].is_string()) {
    msg = j["message"].get<std::string>().substr(0, 1024);
  }
  if (j.is_object() && j.contains("code") && j["code"].is_string()) {
    const std::string word = j["code"];
    for (StatusCode c : allowed) {
      if (word == StatusCodeWord(c)) code = c;
    }
  }
  return Status(code, msg);
}

}  // namespace space::node
