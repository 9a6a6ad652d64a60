// A build context: an uncompressed tarball (ustar, GNU or pax) a client uploads for a
// template recipe's copy steps. The node never extracts it on the host: a copy step's `tar -x`
// runs inside the build sandbox (node/template_builds.cc). Here it is only read, in memory, to
// refuse what no build needs (absolute names, "..", device nodes, FIFOs, links that climb out)
// and to digest what a copy step takes, which keys the layer cache.
//
// Hostile input: every header is checksummed and bounds-checked against the buffer, and the
// member count is capped. Stateless and thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace space::storage {

inline constexpr size_t kMaxTarMembers = 100000;

struct TarMember {
  std::string path;   // normalized: no leading "./" or "/", no trailing "/"; "." for the root
  char type = '0';    // '0' file, '5' directory, '2' symlink, '1' hard link
  uint32_t mode = 0;  // permission bits (07777)
  uint64_t uid = 0;   // owner ids, as the member records them
  uint64_t gid = 0;
  std::string link;       // symlink target or hard link name
  std::string_view data;  // a file's bytes, pointing into the tarball
};

// Lists the members of `tarball` in order. invalid_argument names the first bad member.
// `end`, if given, gets the offset where the members end (the first end-of-archive block).
Result<std::vector<TarMember>> ListTar(std::string_view tarball, size_t* end = nullptr);

// One tarball holding the members of each of `tars` in turn (each checked as ListTar does),
// no larger than `cap` bytes: payload_too_large past it. A later member of a path wins when
// it is extracted, as with one tar written in that order.
Result<std::string> ConcatTars(const std::vector<std::string>& tars, size_t cap);

// One ustar header block (512 bytes, checksummed): `name` and `link` cut to 100 bytes, uid and
// gid to 7 octal digits (longer values need a pax header first, which the caller writes).
std::string UstarHeader(const std::string& name, char type, uint32_t mode, uint64_t uid, uint64_t gid, uint64_t size,
                        const std::string& link);

// "sha256:<hex>" over the members at `src` or below it (paths relative to `src`, types, modes,
// link targets, contents). invalid_argument when no member is at `src`; "." is everything.
Result<std::string> ContextDigest(const std::vector<TarMember>& members, const std::string& src);

}  // namespace space::storage
