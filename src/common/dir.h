// Directory listing relative to a directory fd (never a path a sandbox could redirect).
#pragma once

#include <string>
#include <vector>

#include "common/result.h"

namespace space {

// Names in the directory open at `dir_fd`, without "." and "..", sorted. `what` names the
// directory in errors. `dir_fd` stays owned by the caller.
Result<std::vector<std::string>> ListDirAt(int dir_fd, const std::string& what);

}  // namespace space
