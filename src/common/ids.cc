#include "common/ids.h"

#include <cctype>
#include <string>

namespace space {
namespace {

bool IsAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }

}  // namespace

bool IsSandboxIdChar(char c) { return IsAlnum(c) || c == '_' || c == '-'; }

Status ValidateSandboxId(std::string_view id) {
  if (id.empty() || id.size() > kMaxSandboxIdLen) return InvalidArgument("sandbox id must be 1..64 characters");
  for (char c : id) {
    if (!IsSandboxIdChar(c)) return InvalidArgument("sandbox id " + std::string(id) + ": only [A-Za-z0-9_-] allowed");
  }
  return Status::Ok();
}

bool IsPublicId(std::string_view s, std::string_view prefix) {
  if (s.size() <= prefix.size() + 1 || s.size() > prefix.size() + 65) return false;
  if (s.substr(0, prefix.size()) != prefix || s[prefix.size()] != '_') return false;
  for (char c : s.substr(prefix.size() + 1)) {
    if (!IsAlnum(c)) return false;
  }
  return true;
}

std::string SandboxHostLabel(std::string_view id) {
  std::string out(id);
  for (char& c : out) {
    c = c == '_' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

}  // namespace space
