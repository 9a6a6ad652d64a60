#include "protocol/exec_request.h"

#include "protocol/json_util.h"
#include "protocol/protocol.h"

namespace space::guest {
namespace {

using nlohmann::json;

bool HasNul(std::string_view s) { return s.find('\0') != std::string_view::npos; }

// The member `key`, or nullptr when absent or null.
const json* Member(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

// Member `key` as a pty dimension, 1..kMaxTtySize; `*out` keeps its value when absent.
Status TtyDimension(const json& obj, const char* key, uint16_t* out) {
  const json* v = Member(obj, key);
  if (v == nullptr) return Status::Ok();
  if (!v->is_number_unsigned() || v->get<uint64_t>() < 1 || v->get<uint64_t>() > kMaxTtySize) {
    return InvalidArgument(std::string("tty ") + key + " must be an integer in 1.." + std::to_string(kMaxTtySize));
  }
  *out = static_cast<uint16_t>(v->get<uint64_t>());
  return Status::Ok();
}

}  // namespace

Result<TtySize> ParseTtySize(std::string_view payload) {
  ASSIGN_OR_RETURN(json j, ParseJsonObject(payload, "resize request"));
  TtySize size;
  RETURN_IF_ERROR(TtyDimension(j, "cols", &size.cols));
  RETURN_IF_ERROR(TtyDimension(j, "rows", &size.rows));
  if (size.cols == 0 || size.rows == 0) return InvalidArgument("resize request: cols and rows are required");
  return size;
}

bool IsValidEnvName(std::string_view name) {
  if (name.empty() || name.size() > 1024) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool alpha = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
    bool digit = c >= '0' && c <= '9';
    if (!alpha && !(digit && i > 0)) return false;
  }
  return true;
}

bool IsValidAbsolutePath(std::string_view path) {
  return !path.empty() && path[0] == '/' && path.size() <= kMaxPathBytes && !HasNul(path);
}

std::string EncodeExecRequest(const ExecRequest& req) {
  json env = json::object();
  for (const auto& [key, value] : req.env) env[key] = value;
  json j = {{"cmd", req.cmd}, {"env", std::move(env)}, {"user", req.user}, {"timeout_ms", req.timeout_ms},
            {"stdin", req.keep_stdin}};
  if (req.cwd) j["cwd"] = *req.cwd;
  if (req.tty) {
    j["tty"] = true;
    j["cols"] = req.cols;
    j["rows"] = req.rows;
  }
  return DumpJson(j);
}

Result<ExecRequest> ParseExecRequest(std::string_view payload) {
  ASSIGN_OR_RETURN(json j, ParseJsonObject(payload, "exec request"));
  ExecRequest req;

  const json* cmd = Member(j, "cmd");
  if (cmd == nullptr || !cmd->is_array() || cmd->empty()) {
    return InvalidArgument("exec request: cmd must be a non-empty array of strings");
  }
  if (cmd->size() > kMaxArgs) {
    return InvalidArgument("exec request: cmd has more than " + std::to_string(kMaxArgs) + " entries");
  }
  for (const json& arg : *cmd) {
    if (!arg.is_string()) return InvalidArgument("exec request: cmd entries must be strings");
    const std::string& s = arg.get_ref<const std::string&>();
    if (s.size() > kMaxArgBytes) return InvalidArgument("exec request: cmd entry longer than 64 KiB");
    if (HasNul(s)) return InvalidArgument("exec request: cmd entry contains a NUL byte");
    req.cmd.push_back(s);
  }
  if (req.cmd[0].empty()) return InvalidArgument("exec request: cmd[0] is empty");

  if (const json* env = Member(j, "env")) {
    if (!env->is_object()) return InvalidArgument("exec request: env must be an object of strings");
    for (const auto& [key, value] : env->items()) {
      if (!IsValidEnvName(key)) return InvalidArgument("exec request: invalid env name \"" + key + "\"");
      if (!value.is_string()) return InvalidArgument("exec request: env value of " + key + " must be a string");
      const std::string& v = value.get_ref<const std::string&>();
      if (HasNul(v)) return InvalidArgument("exec request: env value of " + key + " contains a NUL byte");
      req.env.emplace_back(key, v);
    }
  }

  if (const json* cwd = Member(j, "cwd")) {
    if (!cwd->is_string() || !IsValidAbsolutePath(cwd->get_ref<const std::string&>())) {
      return InvalidArgument("exec request: cwd must be an absolute path");
    }
    req.cwd = cwd->get<std::string>();
  }

  if (const json* user = Member(j, "user")) {
    if (user->is_number_unsigned()) {
      req.user = std::to_string(user->get<uint64_t>());
    } else if (user->is_string()) {
      req.user = user->get<std::string>();
    } else {
      return InvalidArgument("exec request: user must be a name or a uid");
    }
    if (req.user.empty() || req.user.size() > 256 || HasNul(req.user)) {
      return InvalidArgument("exec request: invalid user");
    }
  }

  if (const json* timeout = Member(j, "timeout_ms")) {
    // is_number_unsigned is false for negative numbers and for floats.
    if (!timeout->is_number_unsigned()) {
      return InvalidArgument("exec request: timeout_ms must be a non-negative integer");
    }
    req.timeout_ms = timeout->get<uint64_t>();
  }

  for (auto [key, field] : {std::pair{"stdin", &req.keep_stdin}, std::pair{"tty", &req.tty}}) {
    if (const json* b = Member(j, key)) {
      if (!b->is_boolean()) return InvalidArgument(std::string("exec request: ") + key + " must be a boolean");
      *field = b->get<bool>();
    }
  }
  RETURN_IF_ERROR(TtyDimension(j, "cols", &req.cols));
  RETURN_IF_ERROR(TtyDimension(j, "rows", &req.rows));
  return req;
}

}  // namespace space::guest
