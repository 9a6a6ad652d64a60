// `space dev`: the all-in-one server (API + node + SQLite store + local pool) on one machine.
#pragma once

#include <string>

namespace space::cli {

struct DevOptions {
  std::string listen = "127.0.0.1:7722";  // ADDR:PORT; port 0 picks a free port
  std::string data_dir = "/var/lib/space";
  std::string guest_binary;               // default: spaced next to this binary
  bool force_overlay = false;
};

// Runs until SIGINT/SIGTERM. Returns the process exit code.
int RunDev(const DevOptions& options);

}  // namespace space::cli
