// The `space` command line: `space dev` and the v1 API's client commands (docs/openapi.yaml).
#pragma once

namespace space::cli {

// Parses argv and runs the command. Returns the process exit code.
int Main(int argc, char** argv);

}  // namespace space::cli
