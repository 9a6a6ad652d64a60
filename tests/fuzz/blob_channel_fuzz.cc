// libFuzzer target: the node's side of the tree jail's store channel (snapshot/blob_channel.h).
// The jail reads sandbox trees, so the node treats every frame it sends as hostile. The input
// is what a jail writes, for an export's or a restore's policy (the first byte chooses); none
// may crash, hang or throw, and nothing but verified objects and a checked manifest may land.
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "snapshot/blob_channel.h"
#include "snapshot/manifest.h"

using namespace space;
using namespace space::snapshot;

namespace {

// An in-memory store holding one parent snapshot with one file.
class MemoryStore : public BlobStore {
 public:
  Status Put(const std::string& key, std::string_view bytes) override {
    RETURN_IF_ERROR(ValidateKey(key));
    blobs_[key] = std::string(bytes);
    return Status::Ok();
  }
  Result<std::string> Get(const std::string& key, size_t max_bytes) override {
    auto it = blobs_.find(key);
    if (it == blobs_.end()) return NotFound(key);
    if (it->second.size() > max_bytes) return PayloadTooLarge(key);
    return it->second;
  }
  Result<bool> Exists(const std::string& key) override { return blobs_.count(key) > 0; }
  Status Delete(const std::string& key) override {
    blobs_.erase(key);
    return Status::Ok();
  }
  Result<std::vector<std::string>> List(std::string_view) override { return std::vector<std::string>{}; }
  Result<uint64_t> RemoveStaleTemp(int64_t) override { return 0; }

  std::map<std::string, std::string> blobs_;
};

const char kHash[] = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824";  // sha256("hello")

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static bool once = [] {
    ::signal(SIGPIPE, SIG_IGN);
    return true;
  }();
  (void)once;
  if (size == 0) return 0;
  MemoryStore store;
  Manifest parent;
  parent.snap_id = "snap_parent";
  ManifestEntry root;
  root.path = ".";
  root.type = EntryType::kDir;
  root.mode = 0755;
  ManifestEntry file;
  file.path = "f";
  file.mode = 0644;
  file.size = 5;
  file.chunks = {kHash};
  parent.entries = {root, file};
  parent.total_bytes = 5;
  if (!ValidateManifest(parent).ok()) __builtin_trap();  // the harness's own mistake
  (void)store.Put(ManifestKey("snap_parent"), SerializeManifest(parent));
  BlobChannelPolicy policy = (data[0] & 1) ? RestorePolicy(parent) : ExportPolicy("snap_child", "snap_parent");
  policy.idle_timeout_ms = 1000;

  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return 0;
  // The jail's side writes the input and then reads whatever comes back until the end.
  std::thread jail([&] {
    size_t off = 1;
    while (off < size) {
      ssize_t n = ::write(sv[0], data + off, size - off);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    ::shutdown(sv[0], SHUT_WR);
    char buf[65536];
    while (::read(sv[0], buf, sizeof buf) > 0) {
    }
  });
  (void)ServeBlobChannel(sv[1], store, policy);
  ::close(sv[1]);
  jail.join();
  ::close(sv[0]);
  // Whatever happened, the parent is intact and no other manifest than the child's exists.
  for (const auto& [key, bytes] : store.blobs_) {
    if (key.rfind("manifests/", 0) == 0 && key != ManifestKey("snap_parent") && key != ManifestKey("snap_child")) {
      __builtin_trap();
    }
  }
  if (!LoadManifest(store, "snap_parent").ok()) __builtin_trap();
  return 0;
}
