// libFuzzer target: how request paths become sandbox paths. The E2B surface resolves relative
// paths and "~" against the user's home (e2b/proto_json.h ResolvePath), the v1 API checks
// paths (http/validate.h CheckSandboxPath), and the guest splits parent and name
// (guest/files.h SplitParent) before it acts inside the sandbox. Checked properties: an
// accepted path is absolute, bounded and NUL-free, and splitting never loses the name.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "e2b/proto_json.h"
#include "guest/files.h"
#include "http/validate.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string in(reinterpret_cast<const char*>(data), size);
  // The input is "home\npath" or just a path with home /home/user.
  std::string home = "/home/user", path = in;
  if (size_t nl = in.find('\n'); nl != std::string::npos && nl > 0 && in[0] == '/' && nl < 256 &&
                                 in.substr(0, nl).find('\0') == std::string::npos) {
    home = in.substr(0, nl);
    path = in.substr(nl + 1);
  }
  auto resolved = space::e2b::ResolvePath(path, home);
  if (resolved.ok()) {
    if (resolved->empty() || (*resolved)[0] != '/') std::abort();
    if (resolved->find('\0') != std::string::npos) std::abort();
    if (resolved->size() > 4096 + home.size()) std::abort();
    if (!space::api::CheckSandboxPath(*resolved).ok() && resolved->size() <= 4096) std::abort();
  }
  if (space::api::CheckSandboxPath(path).ok()) {
    if (path[0] != '/' || path.find('\0') != std::string::npos) std::abort();
    auto [parent, name] = space::guest::SplitParent(path);
    if (parent.empty() || parent[0] != '/') std::abort();
    if (name.find('/') != std::string::npos) std::abort();
  }
  return 0;
}
