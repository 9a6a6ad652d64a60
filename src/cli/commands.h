// The `space` command line: `space dev` and the API client commands of API.md.
#pragma once

namespace space::cli {

// Parses argv and runs the command. Returns the process exit code.
int Main(int argc, char** argv);

}  // namespace space::cli
