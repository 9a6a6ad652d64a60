// The build jail: where the node runs a template's build tool (debootstrap for "base"), so
// that neither the tool nor the maintainer scripts of the packages it installs (code from a
// package mirror) hold any host privilege.
//
// The tool runs as root of a user namespace of its own that the root broker maps to a uid
// slot leased for the build ("0 <base> 65536", the shape of a sandbox), inside a mount and a
// PID namespace of its own. It sees the tree being built through an idmapped mount of it,
// made exactly as a sandbox's root is, at <run_dir>/build-<slot>: its files land on disk owned
// by ids 0..65535 like every template's. Everything else of the host it sees as an
// unprivileged user would. Only a step that asks for it (debootstrap downloads) keeps the
// host's network; every other step gets a network namespace of its own, with nothing in it.
// A step named "@<name>" is one of the template builder's own (storage/template_builder.h
// RunTreeStep): the jail runs it in its own process instead of executing a program.
//
// A step may read a directory besides the tree (ToolRun::source_dir_fd: a directory import's
// source, which the root broker opened inside the admin's --import-root): it gets a read-only
// idmapped clone of it through the same user namespace and starts with that as its working
// directory, so the files of the source's owners (ids 0..65535) read as they would for host
// root, and nothing else of the host's does. The vm runtime's template disk images are made
// here too (mkfs.ext4 -d of a fresh root, the image on the step's stdin).
//
// Device nodes: mknod is refused in a user namespace, so for a step that asks (debootstrap)
// the jail binds the host's /dev/{null,zero,full,random,urandom,tty} onto empty files in the
// tree's dev/ and leaves an empty dev/console (debootstrap skips nodes that exist). Those
// empty files stay in the template, where every runtime mounts its own /dev over them.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "common/privileged_acts.h"
#include "common/result.h"
#include "storage/pool.h"

namespace space::node {

struct BuildJailConfig {
  std::function<Result<int64_t>()> acquire_slot;  // a uid slot leased for one build
  std::function<void(int64_t)> release_slot;
  std::string run_dir;                            // the mount point's parent: /run/space (0711 or 0755)
  PrivilegedActs* privileged = nullptr;           // id maps, idmapped clones, kills: the broker's
};

// A storage::ToolRunner: runs `run.argv(<run_dir>/build-<slot>)` in the jail over `tree_dir`,
// its output lines to `on_line`; OK only on exit status 0.
Status RunInBuildJail(const BuildJailConfig& config, const std::string& tree_dir, const storage::ToolRun& run,
                      const storage::ProgressFn& on_line);

// The jail's own side, `space build-jail --ctl-fd 3 --out-fd 4 [--stdin-fd 5] [--isolate-net]
// [--bind-devices] --target T -- PROGRAM|@STEP ARGS...`, started only by RunInBuildJail:
// takes the idmapped tree (and the source's clone, if any) from the ctl socket, mounts the tree
// at T in a fresh mount namespace (and network namespace), binds the device files if asked,
// enters the source and runs PROGRAM (or the step) as pid 1 of a fresh PID namespace. Returns
// the exit code.
int BuildJailMain(int argc, char** argv);

}  // namespace space::node
