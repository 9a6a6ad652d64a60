// Fills an empty scratch directory with a template's tree: the built-in "busybox" and
// "base" trees, and imports of a host directory or tarball. Everything below the scratch
// directory is reached with *at() calls relative to its fd and never follows symlinks, since
// an imported or debootstrapped tree may contain links pointing anywhere on the host.
// Stateless and thread-safe; needs root (chown).
#pragma once

#include <string>

#include "common/status.h"
#include "storage/pool.h"

namespace space::storage {

// A tiny root: static busybox with an applet symlink for every applet, etc/passwd with root
// and user (1000:1000), home/user, tmp 01777.
Status BuildBusyboxTree(const std::string& dir, const ProgressFn& progress);

// Debian 12 minbase + python3, ca-certificates, curl, git, then the same account/dirs
// conventions as busybox (user 1000 with /bin/bash) and without apt's .deb cache.
// debootstrap runs through `runner` (unavailable when it is empty).
Status BuildBaseTree(const std::string& dir, const ToolRunner& runner, const ProgressFn& progress);

// Copies a directory (cp -a --reflink=auto) or extracts a tarball (any compression tar
// detects, numeric owners) into `dir`.
Status ImportTree(const std::string& source, const std::string& dir, const ProgressFn& progress);

}  // namespace space::storage
