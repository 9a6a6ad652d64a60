// Manifest: the complete description of one snapshot, stored as manifests/<snap_id>.json.
//
// It lists every entry of the tree (the root itself is ".") in walk order, parents before
// children, with metadata and, for regular files, the object hashes of its 4 MiB chunks. A
// manifest is self-contained: `parent` only records which snapshot the export compared
// against, restoring never reads it, so deleting a parent leaves children restorable.
//
// JSON shape (version 1):
//   {"version":1, "snap_id":"s2", "parent":"s1" or "", "created_at_ms":..., "total_bytes":...,
//    "stored_bytes":..., "entries":[{"path":".", "type":"dir"|"file"|"symlink", "mode":420,
//    "uid":0, "gid":0, "size":..., "mtime_ns":..., "target":"..." (symlink only),
//    "chunks":["<64 hex>",...] (file only)}]}
// Paths and symlink targets are arbitrary bytes on Linux but JSON strings must be UTF-8, so
// both are percent-encoded: bytes < 0x21, 0x7f, >= 0x80 and '%' become %XX.
//
// A manifest read from storage is untrusted: ParseManifest rejects unknown fields, wrong
// types, absolute or '..' paths, NUL bytes, duplicate paths, entries whose parent is not an
// earlier directory, sizes beyond kMaxFileSize, chunk lists that do not match the size and
// malformed hashes. Plain data; thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace space::snapshot {

enum class EntryType { kDir, kFile, kSymlink };

struct ManifestEntry {
  std::string path;  // "." or "a/b/c": relative, no empty, "." or ".." components
  EntryType type = EntryType::kFile;
  uint32_t mode = 0;  // permission bits and setuid/setgid/sticky (07777)
  uint32_t uid = 0;
  uint32_t gid = 0;
  uint64_t size = 0;      // file length; symlink target length; 0 for directories
  int64_t mtime_ns = 0;   // nanoseconds since the epoch (negative before 1970)
  std::string target;     // symlink target (kSymlink only)
  std::vector<std::string> chunks;  // SHA-256 hex of each chunk (kFile only)
  // Status-change time. Sandbox code can reset mtime (touch -d) but not ctime, so an
  // incremental export trusts the parent's chunks only when ctime matches too.
  int64_t ctime_ns = 0;
};

struct Manifest {
  std::string snap_id;
  std::string parent;  // "" for a full export
  int64_t created_at_ms = 0;
  std::vector<ManifestEntry> entries;
  uint64_t total_bytes = 0;   // sum of file sizes
  uint64_t stored_bytes = 0;  // compressed bytes the export that made it newly wrote
};

// Limits a manifest must stay within (a hostile one must not exhaust the restorer).
inline constexpr uint64_t kMaxFileSize = 1ull << 40;           // 1 TiB per file
inline constexpr size_t kMaxManifestBytes = 512u << 20;        // 512 MiB of JSON
inline constexpr size_t kMaxEntries = 4u << 20;                // ~4 M entries
inline constexpr size_t kMaxPathBytes = 4095;                  // PATH_MAX - 1
inline constexpr size_t kMaxNameBytes = 255;                   // NAME_MAX

std::string_view EntryTypeName(EntryType t);

// Chunks a file of `size` bytes is split into.
uint64_t ChunkCount(uint64_t size);

// Checks a relative manifest path ("." or components without "", ".", "..", NUL).
Status ValidateEntryPath(std::string_view path);
// Checks the whole manifest: every rule listed in the header comment.
Status ValidateManifest(const Manifest& m);

class BlobStore;

std::string SerializeManifest(const Manifest& m);
// Parses and validates; every failure is InvalidArgument("manifest <why>").
Result<Manifest> ParseManifest(std::string_view json);

// Reads, parses and validates manifests/<snap_id>.json, and checks it names itself `snap_id`
// (a manifest copied under another key is rejected). NotFound when the snapshot has no
// manifest, i.e. it does not exist or its export never finished.
Result<Manifest> LoadManifest(BlobStore& store, std::string_view snap_id);

}  // namespace space::snapshot
