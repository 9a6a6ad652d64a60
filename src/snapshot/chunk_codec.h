// How a chunk becomes an object: its key is the SHA-256 of the raw bytes, its stored form a
// single zstd frame. The decompressor is told the exact size the manifest promises and fails
// on anything else, so a hostile object can neither balloon memory nor pass as another chunk.
// Compressor and Decompressor each own a zstd context: one per thread, not thread-safe.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "common/result.h"

namespace space::snapshot {

// Files are split into chunks of this size; each chunk is one object.
inline constexpr size_t kChunkSize = 4u << 20;

// 64 lowercase hex digits of SHA-256(data) (OpenSSL EVP; SHA256_* is deprecated in 3.x).
Result<std::string> Sha256Hex(std::string_view data);

// Sha256Hex of kChunkSize zero bytes. A full chunk with this key is written as a hole and
// never fetched (its content is what its key says), and the exporter names a hole in a sparse
// file (a vm disk or RAM file) by it without reading it.
const std::string& ZeroChunkHex();

// The largest stored object a chunk of at most kChunkSize can compress to.
size_t MaxObjectSize();

class Compressor {
 public:
  explicit Compressor(int level = 3);
  ~Compressor();
  Compressor(const Compressor&) = delete;
  Compressor& operator=(const Compressor&) = delete;

  // One zstd frame holding `raw` (with its content size, for Decompressor's check).
  Result<std::string> Compress(std::string_view raw);

 private:
  struct Ctx;
  std::unique_ptr<Ctx> ctx_;
  int level_;
};

class Decompressor {
 public:
  Decompressor();
  ~Decompressor();
  Decompressor(const Decompressor&) = delete;
  Decompressor& operator=(const Decompressor&) = delete;

  // Decompresses `object` into `out` (resized to `expected_size`); fails unless the frame
  // holds exactly `expected_size` bytes.
  Status DecompressExact(std::string_view object, size_t expected_size, std::string& out);

  // Whether `object` is what a key of `sha256_hex` must hold: one zstd frame declaring at most
  // kChunkSize bytes whose content hashes to `sha256_hex` (the check an object from an
  // untrusted writer must pass before it enters a store). `scratch` holds the content.
  Status Verify(std::string_view object, std::string_view sha256_hex, std::string& scratch);

 private:
  struct Ctx;
  std::unique_ptr<Ctx> ctx_;
};

}  // namespace space::snapshot
