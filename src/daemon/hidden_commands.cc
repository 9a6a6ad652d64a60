#include "daemon/hidden_commands.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <set>
#include <string>

#include "broker/broker.h"
#include "front/front.h"
#include "gateway/worker.h"
#include "node/build_jail.h"
#include "node/tree_jail.h"
#include "runtime/vm/vmm_reaper.h"

namespace space::daemon {
namespace {

// Parsed by hand (they are left out of --help) as exactly the `--name N` pairs in `flags`,
// each N a positive int; false on anything else.
bool ParseHelperFlags(int argc, char** argv, std::map<std::string, long>* flags) {
  if (argc != 2 + 2 * static_cast<int>(flags->size())) return false;
  std::set<std::string> seen;
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    char* end = nullptr;
    long v = std::strtol(argv[i + 1], &end, 10);
    if (end == argv[i + 1] || *end != '\0' || v <= 0 || v > 0x7fffffffL) return false;
    if (!flags->count(flag) || !seen.insert(flag).second) return false;
    (*flags)[flag] = v;
  }
  return true;
}

// `space gateway-worker --fd N --node-pid P --uid U`: the node's unprivileged egress gateway
// (node/gateway_process.h).
int RunGatewayWorkerCommand(int argc, char** argv) {
  std::map<std::string, long> f = {{"--fd", 0}, {"--node-pid", 0}, {"--uid", 0}};
  if (!ParseHelperFlags(argc, argv, &f) || f["--fd"] < 3 || f["--uid"] < static_cast<long>(gateway::kMinWorkerUid)) {
    std::cerr << "space gateway-worker: started by the node only (--fd N --node-pid P --uid U)\n";
    return 2;
  }
  int code = gateway::RunGatewayWorker(static_cast<int>(f["--fd"]), static_cast<pid_t>(f["--node-pid"]),
                                       static_cast<uid_t>(f["--uid"]));
  // Connection threads may still be unwinding; skip static destructors under them.
  std::fflush(nullptr);
  ::_exit(code);
}

// `space broker --fd N --node-pid P --cgroup-name space-<16 hex> --pool-dir /ABS/PATH
// --import-root /ABS/PATH`: the root broker of `space dev` / `space node` (broker/broker.h).
// The string flags come last.
int RunBrokerCommand(int argc, char** argv) {
  std::map<std::string, long> f = {{"--fd", 0}, {"--node-pid", 0}};
  const bool named = argc == 12 && std::string(argv[6]) == "--cgroup-name" && broker::IsNodeCgroupName(argv[7]) &&
                     std::string(argv[8]) == "--pool-dir" && argv[9][0] == '/' &&
                     std::string(argv[10]) == "--import-root" && argv[11][0] == '/';  // roots joined by ':'
  if (!named || !ParseHelperFlags(argc - 6, argv, &f) || f["--fd"] < 3) {
    std::cerr << "space broker: started by the node only (--fd N --node-pid P --cgroup-name NAME --pool-dir DIR "
                 "--import-root DIR)\n";
    return 2;
  }
  return broker::RunBroker(static_cast<int>(f["--fd"]), static_cast<pid_t>(f["--node-pid"]), argv[7], argv[9],
                           argv[11]);
}

// `space api-front --channel-fd N --listen-fd M --node-pid P`: the API front of `space dev` /
// `space node` (front/front.h).
int RunFrontCommand(int argc, char** argv) {
  std::map<std::string, long> f = {{"--channel-fd", 0}, {"--listen-fd", 0}, {"--node-pid", 0}};
  if (!ParseHelperFlags(argc, argv, &f) || f["--channel-fd"] < 3 || f["--listen-fd"] < 3 ||
      f["--channel-fd"] == f["--listen-fd"]) {
    std::cerr << "space api-front: started by the node only (--channel-fd N --listen-fd M --node-pid P)\n";
    return 2;
  }
  int code = front::RunFront(static_cast<int>(f["--channel-fd"]), static_cast<int>(f["--listen-fd"]),
                             static_cast<pid_t>(f["--node-pid"]));
  // Connection threads may still be inside a request; skip static destructors under them.
  std::fflush(nullptr);
  ::_exit(code);
}

// `space vmm-reaper --alive-fd N --qemu-pid P`: pid 1 of a VMM's PID namespace
// (runtime/vm/vmm_reaper.h), exec'd by the VMM's launcher.
int RunVmmReaperCommand(int argc, char** argv) {
  std::map<std::string, long> f = {{"--alive-fd", 0}, {"--qemu-pid", 0}};
  if (!ParseHelperFlags(argc, argv, &f) || f["--alive-fd"] < 3) {
    std::cerr << "space vmm-reaper: started by the vm runtime only (--alive-fd N --qemu-pid P)\n";
    return 2;
  }
  return runtime::vm::RunVmmReaper(static_cast<int>(f["--alive-fd"]), static_cast<pid_t>(f["--qemu-pid"]));
}

// `space tree-jail ...` (node/tree_jail.h): no exit-time handlers, as the build jail's.
int RunTreeJailCommand(int argc, char** argv) {
  int code = node::TreeJailMain(argc, argv);
  std::fflush(nullptr);
  ::_exit(code);
}

// `space build-jail ...` (node/build_jail.h): no exit-time handlers in the jail's namespaces.
int RunBuildJailCommand(int argc, char** argv) {
  int code = node::BuildJailMain(argc, argv);
  std::fflush(nullptr);
  ::_exit(code);
}

constexpr HiddenCommand kHiddenCommands[] = {
    {"vmm-reaper", RunVmmReaperCommand}, {"gateway-worker", RunGatewayWorkerCommand},
    {"broker", RunBrokerCommand},        {"api-front", RunFrontCommand},
    {"tree-jail", RunTreeJailCommand},   {"build-jail", RunBuildJailCommand},
};

}  // namespace

std::optional<int> RunHiddenCommand(int argc, char** argv) {
  if (argc < 2) return std::nullopt;
  for (const HiddenCommand& c : kHiddenCommands) {
    if (c.name == argv[1]) return c.run(argc, argv);
  }
  return std::nullopt;
}

}  // namespace space::daemon
