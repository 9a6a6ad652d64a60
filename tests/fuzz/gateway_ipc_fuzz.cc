// libFuzzer target: the node's decoder of messages from its gateway worker (gateway/ipc.h).
// The worker parses raw sandbox traffic, so the root node treats every byte it sends as
// hostile; the same decoder reads the node's messages in the worker. None may crash, hang or
// throw, and a register message that decodes must revalidate its sandbox without crashing.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "gateway/ipc.h"

using namespace space::gateway;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  for (auto from : {ipc::Sender::kWorker, ipc::Sender::kNode}) {
    auto msg = ipc::Decode(in, from);
    if (!msg.ok()) continue;
    if (msg->type == ipc::Type::kRegister) {
      (void)ipc::ParseAddress(msg->body["address"]);
      (void)ipc::SandboxFromJson(msg->body["sandbox"]);
    } else if (msg->type == ipc::Type::kReady) {
      (void)ipc::PortsFromJson(msg->body["ports"]);
    } else if (msg->type == ipc::Type::kConfig) {
      (void)ipc::ConfigFromJson(msg->body);
    }
  }
  return 0;
}
