// The hidden subcommands of `space`: helper processes the node (or the vm runtime) starts by
// re-executing its own binary (`space broker`, `space api-front`, `space gateway-worker`,
// `space build-jail`, `space tree-jail`, `space vmm-reaper`). People never run them; they
// are left out of --help and take exactly the flags their starter passes. Stateless.
#pragma once

#include <optional>
#include <string_view>

namespace space::daemon {

// One hidden subcommand: argv[1] is `name`; `run` gets the whole argv and returns the exit
// code (or ends the process itself).
struct HiddenCommand {
  std::string_view name;
  int (*run)(int argc, char** argv);
};

// When argv[1] names a hidden subcommand, runs it and returns its exit code; nullopt otherwise.
std::optional<int> RunHiddenCommand(int argc, char** argv);

}  // namespace space::daemon
