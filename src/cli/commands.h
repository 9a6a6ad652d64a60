// The `space` command line: the v1 API's client commands (docs/openapi.yaml), and the
// subcommands that start a daemon (`space dev`, `space server`, `space node`, the hidden
// helpers), which it parses and hands to src/daemon.
#pragma once

namespace space::cli {

// Parses argv and runs the command. Returns the process exit code.
int Main(int argc, char** argv);

}  // namespace space::cli
