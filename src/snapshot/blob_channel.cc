#include "snapshot/blob_channel.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "common/syscall.h"
#include "snapshot/chunk_codec.h"
#include "snapshot/manifest.h"

namespace space::snapshot {
namespace {

constexpr uint32_t kMaxHeaderBytes = 64 << 10;

Status WriteAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    ssize_t w = RetryEintr([&] { return ::write(fd, data, n); });
    if (w < 0) return ErrnoStatus("write", "blob channel", errno);
    data += w;
    n -= static_cast<size_t>(w);
  }
  return Status::Ok();
}

// Reads exactly n bytes; waits at most `timeout_ms` for each part (-1: forever). kNotFound
// when the other side closed before the first byte (`eof_ok`): the end of the conversation.
Status ReadAll(int fd, char* data, size_t n, int timeout_ms, bool eof_ok = false) {
  const size_t want = n;
  while (n > 0) {
    if (timeout_ms >= 0) {
      struct pollfd p = {fd, POLLIN, 0};
      int r = RetryEintr([&] { return ::poll(&p, 1, timeout_ms); });
      if (r < 0) return ErrnoStatus("poll", "blob channel", errno);
      if (r == 0) return DeadlineExceeded("blob channel: nothing for " + std::to_string(timeout_ms / 1000) + " s");
    }
    ssize_t got = RetryEintr([&] { return ::read(fd, data, n); });
    if (got < 0) return ErrnoStatus("read", "blob channel", errno);
    if (got == 0) {
      if (eof_ok && n == want) return NotFound("blob channel closed");
      return Unavailable("blob channel: closed mid-frame");
    }
    data += got;
    n -= static_cast<size_t>(got);
  }
  return Status::Ok();
}

Status SendFrame(int fd, const nlohmann::json& header, std::string_view payload = {}) {
  const std::string h = header.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (h.size() > kMaxHeaderBytes) return InvalidArgument("blob channel: header too large");
  const uint32_t len = static_cast<uint32_t>(h.size());
  unsigned char prefix[4] = {static_cast<unsigned char>(len), static_cast<unsigned char>(len >> 8),
                             static_cast<unsigned char>(len >> 16), static_cast<unsigned char>(len >> 24)};
  RETURN_IF_ERROR(WriteAll(fd, reinterpret_cast<const char*>(prefix), 4));
  RETURN_IF_ERROR(WriteAll(fd, h.data(), h.size()));
  return WriteAll(fd, payload.data(), payload.size());
}

struct Frame {
  nlohmann::json header;
  std::string payload;
};

// One frame whose payload is at most `max_payload` bytes.
Result<Frame> ReceiveFrame(int fd, size_t max_payload, int timeout_ms, bool eof_ok) {
  unsigned char prefix[4];
  RETURN_IF_ERROR(ReadAll(fd, reinterpret_cast<char*>(prefix), 4, timeout_ms, eof_ok));
  const uint32_t len = prefix[0] | (prefix[1] << 8) | (prefix[2] << 16) | (static_cast<uint32_t>(prefix[3]) << 24);
  if (len == 0 || len > kMaxHeaderBytes) return InvalidArgument("blob channel: bad header length");
  std::string h(len, '\0');
  RETURN_IF_ERROR(ReadAll(fd, h.data(), len, timeout_ms));
  Frame f;
  f.header = nlohmann::json::parse(h, nullptr, false);
  if (f.header.is_discarded() || !f.header.is_object()) return InvalidArgument("blob channel: header is not a JSON object");
  if (f.header.contains("size")) {
    const auto& s = f.header["size"];
    if (!s.is_number_unsigned() || s.get<uint64_t>() > max_payload) {
      return InvalidArgument("blob channel: payload size missing or over " + std::to_string(max_payload));
    }
    f.payload.resize(s.get<size_t>());
    RETURN_IF_ERROR(ReadAll(fd, f.payload.data(), f.payload.size(), timeout_ms));
  }
  return f;
}

std::string StringField(const nlohmann::json& j, const char* name) {
  return j.contains(name) && j[name].is_string() ? j[name].get<std::string>() : "";
}

Status ErrorFrom(const nlohmann::json& reply) {
  const std::string word = StringField(reply, "code");
  StatusCode code = StatusCode::kInternal;
  for (int c = static_cast<int>(StatusCode::kInvalidArgument); c <= static_cast<int>(StatusCode::kDeadlineExceeded); ++c) {
    if (StatusCodeWord(static_cast<StatusCode>(c)) == word) code = static_cast<StatusCode>(c);
  }
  return Status(code, "node: " + StringField(reply, "message"));
}

size_t MaxPayload() { return std::max(MaxObjectSize(), kMaxManifestBytes); }

// The server's answer to one request; `stats` counts what it put.
Result<std::pair<nlohmann::json, std::string>> Answer(const Frame& f, BlobStore& store, const BlobChannelPolicy& policy,
                                                      Decompressor& dec, std::string& scratch, BlobChannelStats* stats) {
  const std::string op = StringField(f.header, "op"), key = StringField(f.header, "key");
  RETURN_IF_ERROR(ValidateKey(key));
  if (op == "exists") {
    ASSIGN_OR_RETURN(bool exists, store.Exists(key));
    return std::make_pair(nlohmann::json{{"ok", true}, {"exists", exists}}, std::string());
  }
  if (op == "get") {
    Result<std::string> hash = HashFromObjectKey(key);
    bool allowed = hash.ok() ? policy.get_objects.count(*hash) > 0 : false;
    for (const std::string& id : policy.get_manifests) allowed = allowed || key == ManifestKey(id);
    if (!allowed) return PermissionDenied("blob channel: get of " + key + " (not this channel's)");
    ASSIGN_OR_RETURN(std::string bytes, store.Get(key, hash.ok() ? MaxObjectSize() : kMaxManifestBytes));
    nlohmann::json h = {{"ok", true}, {"size", bytes.size()}};
    return std::make_pair(std::move(h), std::move(bytes));
  }
  if (op != "put" || !f.header.contains("size")) return InvalidArgument("blob channel: unknown request " + op);
  if (policy.put_manifest.empty()) return PermissionDenied("blob channel: put of " + key + " (this channel only reads)");
  if (Result<std::string> hash = HashFromObjectKey(key); hash.ok()) {
    if (f.payload.size() > MaxObjectSize()) return InvalidArgument("blob channel: object too large");
    RETURN_IF_ERROR(dec.Verify(f.payload, *hash, scratch).Annotate("blob channel: put " + key));
    RETURN_IF_ERROR(store.Put(key, f.payload));
    stats->objects_written++;
    stats->bytes_written += f.payload.size();
    return std::make_pair(nlohmann::json{{"ok", true}}, std::string());
  }
  if (key != ManifestKey(policy.put_manifest)) {
    return PermissionDenied("blob channel: put of " + key + " (only this export's manifest)");
  }
  ASSIGN_OR_RETURN(Manifest m, ParseManifest(f.payload));
  if (m.snap_id != policy.put_manifest || m.parent != policy.parent_id) {
    return InvalidArgument("blob channel: the manifest names another snapshot or parent");
  }
  std::unordered_set<std::string> seen;
  for (const ManifestEntry& e : m.entries) {
    for (const std::string& h : e.chunks) {
      if (!seen.insert(h).second) continue;
      ASSIGN_OR_RETURN(bool exists, store.Exists(ObjectKey(h)));
      if (!exists) return InvalidArgument("blob channel: the manifest references a missing object " + h);
    }
  }
  RETURN_IF_ERROR(store.Put(key, f.payload));
  stats->manifest_written = true;
  return std::make_pair(nlohmann::json{{"ok", true}}, std::string());
}

// One request and its reply (the jail's side).
Result<nlohmann::json> Call(int fd, const nlohmann::json& request, std::string_view payload, std::string* reply_payload,
                            size_t max_reply) {
  RETURN_IF_ERROR(SendFrame(fd, request, payload));
  ASSIGN_OR_RETURN(Frame f, ReceiveFrame(fd, max_reply, -1, false));
  if (!f.header.contains("ok") || !f.header["ok"].is_boolean()) return Internal("blob channel: malformed reply");
  if (!f.header["ok"].get<bool>()) return ErrorFrom(f.header);
  if (reply_payload != nullptr) *reply_payload = std::move(f.payload);
  return f.header;
}

}  // namespace

Status ChannelBlobStore::Put(const std::string& key, std::string_view bytes) {
  return Call(fd_, {{"op", "put"}, {"key", key}, {"size", bytes.size()}}, bytes, nullptr, 0).status();
}

Result<std::string> ChannelBlobStore::Get(const std::string& key, size_t max_bytes) {
  std::string out;
  RETURN_IF_ERROR(Call(fd_, {{"op", "get"}, {"key", key}}, {}, &out, max_bytes).status());
  return out;
}

Result<bool> ChannelBlobStore::Exists(const std::string& key) {
  ASSIGN_OR_RETURN(nlohmann::json reply, Call(fd_, {{"op", "exists"}, {"key", key}}, {}, nullptr, 0));
  if (!reply.contains("exists") || !reply["exists"].is_boolean()) return Internal("blob channel: malformed reply");
  return reply["exists"].get<bool>();
}

Status ChannelBlobStore::Delete(const std::string& key) { return PermissionDenied("blob channel: no delete of " + key); }

Result<std::vector<std::string>> ChannelBlobStore::List(std::string_view) {
  return PermissionDenied("blob channel: no listing");
}

Result<uint64_t> ChannelBlobStore::RemoveStaleTemp(int64_t) { return PermissionDenied("blob channel: no cleanup"); }

BlobChannelPolicy ExportPolicy(const std::string& snap_id, const std::string& parent_id) {
  BlobChannelPolicy p;
  p.put_manifest = snap_id;
  p.parent_id = parent_id;
  if (!parent_id.empty()) p.get_manifests.push_back(parent_id);
  return p;
}

BlobChannelPolicy RestorePolicy(const Manifest& m) {
  BlobChannelPolicy p;
  p.get_manifests.push_back(m.snap_id);
  for (const ManifestEntry& e : m.entries) p.get_objects.insert(e.chunks.begin(), e.chunks.end());
  return p;
}

Result<BlobChannelStats> ServeBlobChannel(int fd, BlobStore& store, const BlobChannelPolicy& policy) {
  if (!policy.put_manifest.empty()) RETURN_IF_ERROR(ValidateSnapId(policy.put_manifest));
  BlobChannelStats stats;
  Decompressor dec;
  std::string scratch;
  for (;;) {
    Result<Frame> f = ReceiveFrame(fd, MaxPayload(), policy.idle_timeout_ms, /*eof_ok=*/true);
    if (!f.ok() && f.status().code() == StatusCode::kNotFound) return stats;  // closed between frames
    if (!f.ok()) return f.status();
    auto answer = Answer(*f, store, policy, dec, scratch, &stats);
    if (!answer.ok()) {
      // Told, then ended: a refused request ends the conversation.
      (void)SendFrame(fd, {{"ok", false},
                           {"code", std::string(StatusCodeWord(answer.status().code()))},
                           {"message", answer.status().message()}});
      return answer.status();
    }
    RETURN_IF_ERROR(SendFrame(fd, answer->first, answer->second));
  }
}

}  // namespace space::snapshot
