#include "guest/passwd.h"

#include <charconv>
#include <optional>

#include "common/syscall.h"

namespace space::guest {
namespace {

// Largest valid id: (uid_t)-1 means "no change" to the set*id calls.
constexpr uint64_t kMaxId = 0xFFFFFFFEu;

std::optional<uint32_t> ParseId(std::string_view s) {
  if (s.empty() || s.size() > 10) return std::nullopt;
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v > kMaxId) return std::nullopt;
  return static_cast<uint32_t>(v);
}

std::vector<std::string_view> SplitFields(std::string_view line, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (;;) {
    size_t pos = line.find(sep, start);
    if (pos == std::string_view::npos) {
      out.push_back(line.substr(start));
      return out;
    }
    out.push_back(line.substr(start, pos - start));
    start = pos + 1;
  }
}

// Calls `f` for each line that is not too long, blank or a comment.
template <typename F>
void ForEachLine(std::string_view content, F f) {
  size_t start = 0;
  while (start < content.size()) {
    size_t end = content.find('\n', start);
    if (end == std::string_view::npos) end = content.size();
    std::string_view line = content.substr(start, end - start);
    start = end + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || line.size() > kMaxLineBytes || line[0] == '#') continue;
    f(line);
  }
}

// The file's contents, or "" when it does not exist (minimal images may lack it).
Result<std::string> ReadDb(const std::string& path) {
  auto content = ReadFileToString(path, kMaxDbBytes);
  if (!content.ok()) {
    if (content.status().code() == StatusCode::kNotFound) return std::string();
    return content.status();
  }
  return content;
}

}  // namespace

std::vector<UserEntry> ParsePasswd(std::string_view content) {
  std::vector<UserEntry> out;
  ForEachLine(content, [&](std::string_view line) {
    auto f = SplitFields(line, ':');
    if (f.size() != 7 || f[0].empty()) return;
    auto uid = ParseId(f[2]);
    auto gid = ParseId(f[3]);
    if (!uid || !gid) return;
    out.push_back(UserEntry{std::string(f[0]), *uid, *gid, std::string(f[5]), std::string(f[6])});
  });
  return out;
}

std::vector<gid_t> ParseGroupsOf(std::string_view content, std::string_view user) {
  std::vector<gid_t> out;
  // An empty member list splits into one empty name, which must not match.
  if (user.empty()) return out;
  ForEachLine(content, [&](std::string_view line) {
    auto f = SplitFields(line, ':');
    if (f.size() != 4) return;
    auto gid = ParseId(f[2]);
    if (!gid) return;
    for (std::string_view member : SplitFields(f[3], ',')) {
      if (member == user) {
        out.push_back(*gid);
        return;
      }
    }
  });
  return out;
}

Result<UserEntry> ResolveUser(std::string_view spec, const std::string& passwd_path) {
  if (spec.empty()) return InvalidArgument("user: empty name");
  ASSIGN_OR_RETURN(std::string content, ReadDb(passwd_path));
  std::vector<UserEntry> users = ParsePasswd(content);
  for (const auto& u : users) {
    if (u.name == spec) return u;
  }
  std::optional<uint32_t> uid = ParseId(spec);
  if (uid) {
    for (const auto& u : users) {
      if (u.uid == *uid) return u;
    }
  }
  if (spec == "root") return UserEntry{"root", 0, 0, "/root", "/bin/sh"};
  if (uid) return UserEntry{std::string(spec), *uid, *uid, "/", "/bin/sh"};
  return NotFound("user " + std::string(spec) + ": not in " + passwd_path);
}

Result<std::vector<gid_t>> SupplementaryGroups(const UserEntry& user, const std::string& group_path) {
  ASSIGN_OR_RETURN(std::string content, ReadDb(group_path));
  std::vector<gid_t> out{user.gid};
  for (gid_t g : ParseGroupsOf(content, user.name)) {
    bool seen = false;
    for (gid_t have : out) seen = seen || have == g;
    if (!seen) out.push_back(g);
  }
  return out;
}

}  // namespace space::guest
