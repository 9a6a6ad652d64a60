// Builds a Debian root with debootstrap, from the mirror the host's apt already uses.
// Stateless and thread-safe.
#pragma once

#include <string>
#include <vector>

#include "common/result.h"
#include "storage/pool.h"

namespace space::storage {

struct AptSource {
  std::string file;     // for error messages and the deb822/one-line choice
  std::string content;
};

// First http(s) URI of a "deb" entry for `suite` with component main. One-line
// (sources.list, *.list) and deb822 (*.sources) formats; commented and disabled entries skip.
Result<std::string> FindDebianMirror(const std::vector<AptSource>& sources, const std::string& suite);
// Same over /etc/apt/sources.list then /etc/apt/sources.list.d/* (sorted).
Result<std::string> FindHostDebianMirror(const std::string& suite);

// debootstrap --variant=minbase --include=... bookworm <target> <mirror>: the command line
// that builds "base" into `target`, an existing directory. Run through a ToolRunner (pool.h).
std::vector<std::string> DebootstrapArgv(const std::string& target, const std::string& mirror);

}  // namespace space::storage
