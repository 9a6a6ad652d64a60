// User and group lookup from the sandbox's /etc/passwd and /etc/group.
//
// spaced is linked statically, so NSS (getpwnam, getgrouplist) is unavailable; these
// parsers read the files directly. The files belong to the sandbox and are hostile: input
// is bounded (files over kMaxDbBytes are refused, lines over kMaxLineBytes are skipped) and
// malformed lines are skipped. Stateless and thread-safe.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace space::guest {

inline constexpr size_t kMaxDbBytes = 1 << 20;
inline constexpr size_t kMaxLineBytes = 4096;

struct UserEntry {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;
  std::string home;
  std::string shell;
};

// All well-formed entries of a passwd(5) document, in file order.
std::vector<UserEntry> ParsePasswd(std::string_view content);

// Gids of the group(5) entries listing `user` as a member, in file order.
std::vector<gid_t> ParseGroupsOf(std::string_view content, std::string_view user);

// Resolves `spec` (a user name, or a decimal uid) against the passwd file at `path`.
// A name matches first, then a uid. A missing file or entry still resolves "root" (uid 0)
// and any decimal uid (gid = uid, home "/"), as container runtimes do; an unknown name is
// kNotFound.
Result<UserEntry> ResolveUser(std::string_view spec, const std::string& passwd_path);

// The supplementary groups for `user`: its primary gid, then every group in the group
// file at `group_path` that lists it. A missing group file yields just the primary gid.
Result<std::vector<gid_t>> SupplementaryGroups(const UserEntry& user, const std::string& group_path);

}  // namespace space::guest
