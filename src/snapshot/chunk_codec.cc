#include "snapshot/chunk_codec.h"

#include <openssl/evp.h>
#include <zstd.h>

namespace space::snapshot {

Result<std::string> Sha256Hex(std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr) != 1 || len != 32) {
    return Internal("sha256: OpenSSL failure");
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(64, '0');
  for (unsigned int i = 0; i < len; ++i) {
    out[2 * i] = kHex[md[i] >> 4];
    out[2 * i + 1] = kHex[md[i] & 15];
  }
  return out;
}

const std::string& ZeroChunkHex() {
  static const std::string hex = [] {
    auto h = Sha256Hex(std::string(kChunkSize, '\0'));
    return h.ok() ? *h : std::string();  // empty never matches a key
  }();
  return hex;
}

size_t MaxObjectSize() { return ZSTD_compressBound(kChunkSize); }

struct Compressor::Ctx {
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ~Ctx() { ZSTD_freeCCtx(cctx); }
};

Compressor::Compressor(int level) : ctx_(std::make_unique<Ctx>()), level_(level) {}
Compressor::~Compressor() = default;

Result<std::string> Compressor::Compress(std::string_view raw) {
  if (ctx_->cctx == nullptr) return Internal("zstd: cannot allocate a compression context");
  std::string out(ZSTD_compressBound(raw.size()), '\0');
  size_t n = ZSTD_compressCCtx(ctx_->cctx, out.data(), out.size(), raw.data(), raw.size(), level_);
  if (ZSTD_isError(n)) return Internal(std::string("zstd compress: ") + ZSTD_getErrorName(n));
  out.resize(n);
  return out;
}

struct Decompressor::Ctx {
  ZSTD_DCtx* dctx = ZSTD_createDCtx();
  ~Ctx() { ZSTD_freeDCtx(dctx); }
};

Decompressor::Decompressor() : ctx_(std::make_unique<Ctx>()) {}
Decompressor::~Decompressor() = default;

Status Decompressor::DecompressExact(std::string_view object, size_t expected_size, std::string& out) {
  if (ctx_->dctx == nullptr) return Internal("zstd: cannot allocate a decompression context");
  unsigned long long declared = ZSTD_getFrameContentSize(object.data(), object.size());
  if (declared == ZSTD_CONTENTSIZE_ERROR || declared != expected_size) {
    return Internal("zstd frame declares " + std::to_string(static_cast<long long>(declared)) +
                    " bytes, expected " + std::to_string(expected_size));
  }
  // ZSTD_decompressDCtx requires the input to be whole frames and stops at dst capacity,
  // so memory stays bounded by the manifest's size, not by what the object claims.
  out.resize(expected_size);
  size_t n = ZSTD_decompressDCtx(ctx_->dctx, out.data(), out.size(), object.data(), object.size());
  if (ZSTD_isError(n)) return Internal(std::string("zstd decompress: ") + ZSTD_getErrorName(n));
  if (n != expected_size) return Internal("zstd decompress: short frame");
  return Status::Ok();
}

Status Decompressor::Verify(std::string_view object, std::string_view sha256_hex, std::string& scratch) {
  unsigned long long declared = ZSTD_getFrameContentSize(object.data(), object.size());
  if (declared == ZSTD_CONTENTSIZE_ERROR || declared == ZSTD_CONTENTSIZE_UNKNOWN || declared > kChunkSize) {
    return InvalidArgument("object: not one zstd frame of at most one chunk");
  }
  RETURN_IF_ERROR(DecompressExact(object, static_cast<size_t>(declared), scratch));
  ASSIGN_OR_RETURN(std::string hex, Sha256Hex(scratch));
  if (hex != sha256_hex) return InvalidArgument("object: its content hashes to " + hex + ", not " + std::string(sha256_hex));
  return Status::Ok();
}

}  // namespace space::snapshot
