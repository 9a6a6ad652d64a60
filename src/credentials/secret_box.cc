#include "credentials/secret_box.h"

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
constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

struct CtxFree {
  void operator()(EVP_CIPHER_CTX* c) const { EVP_CIPHER_CTX_free(c); }
};
using CtxPtr = std::unique_ptr<EVP_CIPHER_CTX, CtxFree>;

int Base64Value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

const unsigned char* Bytes(std::string_view s) { return reinterpret_cast<const unsigned char*>(s.data()); }

}  // namespace

std::string Base64Encode(std::string_view data) {
  std::string out;
  out.reserve((data.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= data.size(); i += 3) {
    uint32_t v = uint32_t{Bytes(data)[i]} << 16 | uint32_t{Bytes(data)[i + 1]} << 8 | Bytes(data)[i + 2];
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  size_t rest = data.size() - i;
  if (rest > 0) {
    uint32_t v = uint32_t{Bytes(data)[i]} << 16;
    if (rest == 2) v |= uint32_t{Bytes(data)[i + 1]} << 8;
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    out += rest == 2 ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

bool Base64Decode(std::string_view text, std::string* out) {
  out->clear();
  if (text.size() % 4 != 0) return false;
  out->reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    bool last = i + 4 == text.size();
    int pad = 0;
    if (last && text[i + 3] == '=') pad = text[i + 2] == '=' ? 2 : 1;
    int v[4] = {0, 0, 0, 0};
    for (int j = 0; j < 4 - pad; ++j) {
      v[j] = Base64Value(text[i + j]);
      if (v[j] < 0) return false;
    }
    uint32_t n = uint32_t(v[0]) << 18 | uint32_t(v[1]) << 12 | uint32_t(v[2]) << 6 | uint32_t(v[3]);
    // Non-zero bits under the padding would make two encodings decode alike; refuse them.
    if ((pad == 1 && (n & 0xff) != 0) || (pad == 2 && (n & 0xffff) != 0)) return false;
    out->push_back(static_cast<char>(n >> 16));
    if (pad < 2) out->push_back(static_cast<char>((n >> 8) & 0xff));
    if (pad < 1) out->push_back(static_cast<char>(n & 0xff));
  }
  return true;
}

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
  if (!Base64Decode(sealed, &raw) || raw.size() < kNonceSize + kTagSize) return refuse();
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
