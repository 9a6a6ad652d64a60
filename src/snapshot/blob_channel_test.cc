// The export channel end to end over a socket pair, and what the node's side refuses.
#include "snapshot/blob_channel.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/unique_fd.h"
#include "snapshot/chunk_codec.h"
#include "snapshot/exporter.h"
#include "snapshot/local_blob_store.h"
#include "snapshot/manifest.h"
#include "snapshot/test_util.h"

namespace space::snapshot {
namespace {

using testing::TempDir;
using testing::WriteFile;

struct Pair {
  UniqueFd jail, node;
};

Pair StreamPair() {
  int sv[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  return {UniqueFd(sv[0]), UniqueFd(sv[1])};
}

// One raw request as a hostile jail would write it; the reply header.
nlohmann::json Raw(int fd, const nlohmann::json& header, const std::string& payload = "") {
  std::string h = header.dump();
  uint32_t len = static_cast<uint32_t>(h.size());
  unsigned char p[4] = {static_cast<unsigned char>(len), static_cast<unsigned char>(len >> 8),
                        static_cast<unsigned char>(len >> 16), static_cast<unsigned char>(len >> 24)};
  std::string frame(reinterpret_cast<char*>(p), 4);
  frame += h + payload;
  EXPECT_EQ(::write(fd, frame.data(), frame.size()), static_cast<ssize_t>(frame.size()));
  unsigned char q[4];
  if (::read(fd, q, 4) != 4) return nullptr;
  uint32_t rlen = q[0] | (q[1] << 8) | (q[2] << 16) | (static_cast<uint32_t>(q[3]) << 24);
  std::string r(rlen, '\0');
  if (::read(fd, r.data(), rlen) != static_cast<ssize_t>(rlen)) return nullptr;
  auto reply = nlohmann::json::parse(r, nullptr, false);
  if (reply.is_object() && reply.contains("size")) {  // and its payload, read as a client must
    std::string body(reply["size"].get<size_t>(), '\0');
    size_t got = 0;
    while (got < body.size()) {
      ssize_t n = ::read(fd, body.data() + got, body.size() - got);
      if (n <= 0) return nullptr;
      got += static_cast<size_t>(n);
    }
  }
  return reply;
}

class BlobChannelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = LocalBlobStore::Open(dir_.Sub("store"));
    ASSERT_TRUE(s.ok());
    store_ = std::move(*s);
    ASSERT_EQ(::mkdir(dir_.Sub("tree").c_str(), 0755), 0);
    WriteFile(dir_.Sub("tree/a"), "alpha");
    WriteFile(dir_.Sub("tree/b"), std::string(100000, 'b'));
    ASSERT_TRUE(Export(dir_.Sub("tree"), "snap_1", "", *store_).ok());
  }

  // Serves one conversation on a thread; its result once the other end closes.
  std::thread Serve(int fd, BlobChannelPolicy policy, Result<BlobChannelStats>* out) {
    return std::thread([this, fd, policy, out] { *out = ServeBlobChannel(fd, *store_, policy); });
  }

  TempDir dir_;
  std::unique_ptr<LocalBlobStore> store_;
};

TEST_F(BlobChannelTest, AnIncrementalExportThroughTheChannelCommits) {
  WriteFile(dir_.Sub("tree/c"), "new content");
  Pair p = StreamPair();
  Result<BlobChannelStats> served = Internal("not run");
  std::thread t = Serve(p.node.get(), ExportPolicy("snap_2", "snap_1"), &served);
  {
    ChannelBlobStore remote(p.jail.get());
    UniqueFd root(::open(dir_.Sub("tree").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    Result<ExportStats> st = ExportAt(root.get(), "snap_2", "snap_1", remote);
    ASSERT_TRUE(st.ok()) << st.status().ToString();
    EXPECT_EQ(st->files_reused, 2u);  // a and b came from the parent's manifest, unread
    EXPECT_EQ(st->objects_written, 1u);
    EXPECT_FALSE(remote.Delete("manifests/snap_1.json").ok());
    EXPECT_FALSE(remote.List("objects/").ok());
  }
  p.jail.reset();
  t.join();
  ASSERT_TRUE(served.ok()) << served.status().ToString();
  EXPECT_TRUE(served->manifest_written);
  EXPECT_EQ(served->objects_written, 1u);
  Result<Manifest> m = LoadManifest(*store_, "snap_2");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->parent, "snap_1");
}

TEST_F(BlobChannelTest, RefusesWhatOneExportMayNotDo) {
  Compressor c;
  Result<std::string> object = c.Compress("some content");
  ASSERT_TRUE(object.ok());
  Result<std::string> hash = Sha256Hex("some content"), other = Sha256Hex("other content");
  ASSERT_TRUE(hash.ok() && other.ok());
  Result<Manifest> parent = LoadManifest(*store_, "snap_1");
  ASSERT_TRUE(parent.ok());
  Manifest wrong_parent = *parent, missing = *parent;
  wrong_parent.snap_id = missing.snap_id = "snap_2";
  wrong_parent.parent = "snap_0";
  missing.parent = "snap_1";
  for (auto& e : missing.entries) {
    if (!e.chunks.empty()) e.chunks[0] = *other;  // never put
  }
  struct Case {
    const char* what;
    nlohmann::json header;
    std::string payload;
  };
  const std::vector<Case> cases = {
      {"content under another hash", {{"op", "put"}, {"key", ObjectKey(*other)}, {"size", object->size()}}, *object},
      {"not zstd", {{"op", "put"}, {"key", ObjectKey(*hash)}, {"size", 12}}, "some content"},
      {"another snapshot's manifest", {{"op", "put"}, {"key", "manifests/snap_3.json"}, {"size", 2}}, "{}"},
      {"a manifest naming another parent",
       {{"op", "put"}, {"key", "manifests/snap_2.json"}, {"size", SerializeManifest(wrong_parent).size()}},
       SerializeManifest(wrong_parent)},
      {"a manifest with a missing object",
       {{"op", "put"}, {"key", "manifests/snap_2.json"}, {"size", SerializeManifest(missing).size()}},
       SerializeManifest(missing)},
      {"a get of an object", {{"op", "get"}, {"key", ObjectKey(*hash)}}, ""},
      {"a get of another manifest", {{"op", "get"}, {"key", "manifests/snap_9.json"}}, ""},
      {"a delete", {{"op", "delete"}, {"key", "manifests/snap_1.json"}}, ""},
      {"a path for a key", {{"op", "exists"}, {"key", "../../etc/passwd"}}, ""},
      {"a put without a size", {{"op", "put"}, {"key", ObjectKey(*hash)}}, ""},
  };
  for (const Case& c : cases) {
    Pair p = StreamPair();
    Result<BlobChannelStats> served = Internal("not run");
    std::thread t = Serve(p.node.get(), ExportPolicy("snap_2", "snap_1"), &served);
    nlohmann::json reply = Raw(p.jail.get(), c.header, c.payload);
    p.jail.reset();
    t.join();
    EXPECT_FALSE(served.ok()) << c.what;
    ASSERT_TRUE(reply.is_object()) << c.what;
    EXPECT_EQ(reply.value("ok", true), false) << c.what;
  }
  EXPECT_FALSE(store_->Exists(ObjectKey(*other)).value());
  EXPECT_FALSE(store_->Exists("manifests/snap_2.json").value());
  EXPECT_FALSE(store_->Exists("manifests/snap_3.json").value());
  // A header length over the bound, and a payload size over the largest object or manifest.
  for (const std::string& bad : {std::string("\xff\xff\xff\x7f", 4), std::string("\x00\x00\x00\x00", 4)}) {
    Pair p = StreamPair();
    Result<BlobChannelStats> served = Internal("not run");
    std::thread t = Serve(p.node.get(), ExportPolicy("snap_2", ""), &served);
    ASSERT_EQ(::write(p.jail.get(), bad.data(), bad.size()), 4);
    p.jail.reset();
    t.join();
    EXPECT_FALSE(served.ok());
  }
  // What one export does, it may: exists, a verified object, the parent's manifest.
  Pair p = StreamPair();
  Result<BlobChannelStats> served = Internal("not run");
  std::thread t = Serve(p.node.get(), ExportPolicy("snap_2", "snap_1"), &served);
  EXPECT_EQ(Raw(p.jail.get(), {{"op", "exists"}, {"key", ObjectKey(*hash)}}).value("exists", true), false);
  EXPECT_EQ(Raw(p.jail.get(), {{"op", "put"}, {"key", ObjectKey(*hash)}, {"size", object->size()}}, *object).value("ok", false), true);
  EXPECT_EQ(Raw(p.jail.get(), {{"op", "get"}, {"key", "manifests/snap_1.json"}}).value("ok", false), true);
  p.jail.reset();
  t.join();
  EXPECT_TRUE(served.ok()) << served.status().ToString();
  EXPECT_TRUE(store_->Exists(ObjectKey(*hash)).value());
}

TEST_F(BlobChannelTest, ARestoreGetsOnlyItsManifestAndItsObjects) {
  Result<Manifest> m = LoadManifest(*store_, "snap_1");
  ASSERT_TRUE(m.ok());
  std::string listed;
  for (const auto& e : m->entries) {
    if (!e.chunks.empty()) listed = e.chunks[0];
  }
  ASSERT_FALSE(listed.empty());
  // Another snapshot's object, in the same store.
  WriteFile(dir_.Sub("tree/c"), "only in snap_x");
  ASSERT_TRUE(Export(dir_.Sub("tree"), "snap_x", "snap_1", *store_).ok());
  Result<std::string> foreign = Sha256Hex("only in snap_x");
  ASSERT_TRUE(foreign.ok());
  Compressor c;
  Result<std::string> object = c.Compress("x");
  Result<std::string> hash = Sha256Hex("x");
  ASSERT_TRUE(object.ok() && hash.ok());
  const BlobChannelPolicy policy = RestorePolicy(*m);
  struct Case {
    const char* what;
    nlohmann::json header;
    std::string payload;
    bool allowed;
  };
  const std::vector<Case> cases = {
      {"its manifest", {{"op", "get"}, {"key", "manifests/snap_1.json"}}, "", true},
      {"an object it lists", {{"op", "get"}, {"key", ObjectKey(listed)}}, "", true},
      {"another snapshot's object", {{"op", "get"}, {"key", ObjectKey(*foreign)}}, "", false},
      {"another manifest", {{"op", "get"}, {"key", "manifests/snap_x.json"}}, "", false},
      {"a put", {{"op", "put"}, {"key", ObjectKey(*hash)}, {"size", object->size()}}, *object, false},
  };
  for (const Case& k : cases) {
    Pair p = StreamPair();
    Result<BlobChannelStats> served = Internal("not run");
    std::thread t = Serve(p.node.get(), policy, &served);
    nlohmann::json reply = Raw(p.jail.get(), k.header, k.payload);
    p.jail.reset();
    t.join();
    ASSERT_TRUE(reply.is_object()) << k.what;
    EXPECT_EQ(reply.value("ok", !k.allowed), k.allowed) << k.what;
    EXPECT_EQ(served.ok(), k.allowed) << k.what;
  }
  EXPECT_FALSE(store_->Exists(ObjectKey(*hash)).value());
}

}  // namespace
}  // namespace space::snapshot
