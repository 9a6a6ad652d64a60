#include "credentials/secret_box.h"

#include "common/base64.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <cstdint>
#include <memory>

namespace space::credentials {
namespace {

constexpr size_t kNonceSize = 12;
constexpr size_t kTagSize = 16;
constexpr size_t kMaxAad = 64 * 1024;
constexpr std::string_view kVersion = "v1:";

struct CtxFree {
  void operator()(EVP_CIPHER_CTX* c) const { EVP_CIPHER_CTX_free(c); }
};
using CtxPtr = std::unique_ptr<EVP_CIPHER_CTX, CtxFree>;

const unsigned char* Bytes(std::string_view s) { return reinterpret_cast<const unsigned char*>(s.data()); }

}  // namespace


Result<std::string> Seal(const Kek& kek, std::string_view plaintext, std::string_view aad) {
  if (plaintext.size() > kMaxSealedPlaintext) {
    return InvalidArgument("secret is " + std::to_string(plaintext.size()) + " bytes; at most " +
                           std::to_string(kMaxSealedPlaintext) + " can be sealed");
  }
  if (aad.size() > kMaxAad) return InvalidArgument("associated data exceeds 64 KiB");
  std::string raw(kNonceSize + plaintext.size() + kTagSize, '\0');
  auto* nonce = reinterpret_cast<unsigned char*>(raw.data());
  unsigned char* ct = nonce + kNonceSize;
  if (RAND_bytes(nonce, kNonceSize) != 1) return Internal("RAND_bytes failed for the seal nonce");

  CtxPtr ctx(EVP_CIPHER_CTX_new());
  int len = 0, fin = 0;
  bool ok =
      ctx && EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, nullptr, nullptr) == 1 &&
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_IVLEN, kNonceSize, nullptr) == 1 &&
      EVP_EncryptInit_ex(ctx.get(), nullptr, nullptr, kek.data(), nonce) == 1 &&
      (aad.empty() || EVP_EncryptUpdate(ctx.get(), nullptr, &len, Bytes(aad), static_cast<int>(aad.size())) == 1) &&
      EVP_EncryptUpdate(ctx.get(), ct, &len, Bytes(plaintext), static_cast<int>(plaintext.size())) == 1 &&
      EVP_EncryptFinal_ex(ctx.get(), ct + len, &fin) == 1 && static_cast<size_t>(len + fin) == plaintext.size() &&
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, kTagSize, ct + plaintext.size()) == 1;
  if (!ok) return Internal("AES-256-GCM seal failed in OpenSSL");
  return std::string(kVersion) + Base64Encode(raw);
}

Result<std::string> Open(const Kek& kek, std::string_view sealed, std::string_view aad) {
  // One message for every failure: which check failed is of no use to a caller and of some
  // use to someone probing the store.
  auto refuse = [] { return InvalidArgument("sealed secret does not open (corrupt, or wrong key or owner)"); };
  if (sealed.substr(0, kVersion.size()) != kVersion) return refuse();
  sealed.remove_prefix(kVersion.size());
  if (sealed.size() > (kNonceSize + kMaxSealedPlaintext + kTagSize + 2) / 3 * 4) return refuse();
  if (aad.size() > kMaxAad) return refuse();
  std::string raw;
  auto decoded = Base64Decode(sealed);
  if (!decoded.ok()) return refuse();
  raw = std::move(*decoded);
  if (raw.size() < kNonceSize + kTagSize) return refuse();
  size_t ct_len = raw.size() - kNonceSize - kTagSize;
  const auto* nonce = Bytes(raw);
  const unsigned char* ct = nonce + kNonceSize;
  std::string tag(raw, kNonceSize + ct_len, kTagSize);

  std::string plain(ct_len, '\0');
  auto* out = reinterpret_cast<unsigned char*>(plain.data());
  CtxPtr ctx(EVP_CIPHER_CTX_new());
  int len = 0, fin = 0;
  bool ok =
      ctx && EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, nullptr, nullptr) == 1 &&
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_IVLEN, kNonceSize, nullptr) == 1 &&
      EVP_DecryptInit_ex(ctx.get(), nullptr, nullptr, kek.data(), nonce) == 1 &&
      (aad.empty() || EVP_DecryptUpdate(ctx.get(), nullptr, &len, Bytes(aad), static_cast<int>(aad.size())) == 1) &&
      EVP_DecryptUpdate(ctx.get(), out, &len, ct, static_cast<int>(ct_len)) == 1 &&
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, kTagSize, tag.data()) == 1 &&
      EVP_DecryptFinal_ex(ctx.get(), out + len, &fin) == 1 && static_cast<size_t>(len + fin) == ct_len;
  if (!ok) {
    // Unauthenticated plaintext must not linger in freed memory either.
    OPENSSL_cleanse(plain.data(), plain.size());
    return refuse();
  }
  return plain;
}

}  // namespace space::credentials
