// Fills an empty scratch directory with a template's tree: the built-in "busybox" and
// "base" trees, and imports of a host directory or tarball.
//
// Every step that writes into the tree runs through a ToolRunner (pool.h): the node's runs it
// in the build jail, as root of a user namespace of its own (node/build_jail.h), so a
// tarball's members, a debootstrapped tree's planted symlinks and the code of its packages
// reach no host privilege. Within a step, every path below the tree is resolved beneath its
// root without following a symlink (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS), since a
// debootstrapped tree may hold links pointing anywhere. Stateless and thread-safe.
#pragma once

#include <string>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"
#include "storage/pool.h"

namespace space::storage {

// A tiny root: static busybox with an applet symlink for every applet, etc/passwd with root
// and user (1000:1000), home/user, tmp 01777. One step ("@busybox") through `runner`.
Status BuildBusyboxTree(const std::string& dir, const ToolRunner& runner, const ProgressFn& progress);

// Debian 12 minbase + python3, ca-certificates, curl, git, then the same account/dirs
// conventions as busybox (user 1000 with /bin/bash) and without apt's .deb cache.
// Three steps through `runner` ("@base-prepare", debootstrap with the network, "@base-finish");
// unavailable when it is empty.
Status BuildBaseTree(const std::string& dir, const ToolRunner& runner, const ProgressFn& progress);

// The import roots (the trusted template sources) travel as one string: absolute directories
// joined by ':', as $PATH (none may hold a ':'). "/" alone: anywhere.
std::vector<std::string> SplitImportRoots(const std::string& roots);
// The root of `roots` that the absolute path `source` is lexically below (or is), the longest
// such; "" when there is none.
std::string ImportRootOf(const std::string& roots, const std::string& source);

// Opens an import's `source`, an absolute host path, inside the import root it is below
// (ImportRootOf) as if that were the root (openat2 RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS):
// neither ".." nor a symlink leads out of it. A path below none of `import_roots` is
// kPermissionDenied. O_NONBLOCK: a FIFO must not hang it.
Result<UniqueFd> OpenImportSource(const std::string& import_roots, const std::string& source);

// Extracts a host directory or tarball open as `source_fd` (OpenImportSource, or the root
// broker's import_open; `source` names it in messages) into `dir`: gzip, bzip2, xz, zstd,
// lzip, lzma or compress, by its magic; numeric owners, modes, user.* and security.capability
// xattrs. `tar -x` writes the tree in a step through `runner`: a tarball is its stdin; a
// directory (any descriptor of it, O_PATH will do) is the step's source (ToolRun::source_dir_fd),
// which `tar -c` in the same step reads, so this process reads none of it. Device nodes below dev/ are left out:
// every runtime mounts its own /dev there, and a user namespace cannot make them; one
// anywhere else fails the import, and so does an owner beyond 65535 (the ids a template, like
// a sandbox, maps). A tree with a .space-vm (the vm runtime's own state) is refused.
Status ImportTree(int source_fd, const std::string& source, const std::string& dir, const ToolRunner& runner,
                  const ProgressFn& progress);

// Runs one of the steps above named "@<name>" over the tree at argv[1], in this process: what
// a runner does with an argv that starts with '@'.
Status RunTreeStep(const std::vector<std::string>& argv, const ProgressFn& progress);

// A ToolRunner without a jail: "@" steps in this process and programs through RunProcess, as
// whoever calls (for tests and a pool opened without the node's jail).
Status RunToolHere(const std::string& tree_dir, const ToolRun& run, const ProgressFn& on_line);

}  // namespace space::storage
