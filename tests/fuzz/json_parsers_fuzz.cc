// libFuzzer target: every JSON parser that reads hostile input — the guest's exec and file
// requests (from the node, but the guest is the untrusted side's code) and snapshot
// manifests read back from the store. None may crash, hang or throw.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "guest/files.h"
#include "protocol/exec_request.h"
#include "snapshot/manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  (void)space::guest::ParseExecRequest(in);
  (void)space::guest::ParseFileOp(in);
  (void)space::snapshot::ParseManifest(in);
  return 0;
}
