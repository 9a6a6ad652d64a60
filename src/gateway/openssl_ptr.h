// Owning handles for OpenSSL objects: a unique_ptr whose deleter is the object's own free
// function, so every exit path releases what was made (as credentials/secret_box.cc does).
// Each free function accepts nullptr. An OpenSSL call that takes its own reference (SSL_new
// on an SSL_CTX, SSL_CTX_use_certificate, X509_add_ext...) leaves this handle's reference ours
// to drop.
#pragma once

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <memory>

namespace space::gateway {

template <auto kFree>
struct OpenSslFree {
  template <typename T>
  void operator()(T* p) const {
    kFree(p);
  }
};

using BioPtr = std::unique_ptr<BIO, OpenSslFree<&BIO_free>>;
using BignumPtr = std::unique_ptr<BIGNUM, OpenSslFree<&BN_free>>;
using EvpPkeyPtr = std::unique_ptr<EVP_PKEY, OpenSslFree<&EVP_PKEY_free>>;
using X509Ptr = std::unique_ptr<X509, OpenSslFree<&X509_free>>;
using X509ExtensionPtr = std::unique_ptr<X509_EXTENSION, OpenSslFree<&X509_EXTENSION_free>>;
using SslCtxPtr = std::unique_ptr<SSL_CTX, OpenSslFree<&SSL_CTX_free>>;
using SslPtr = std::unique_ptr<SSL, OpenSslFree<&SSL_free>>;

// Another owning handle to `ctx` (OpenSSL's own reference count), or null for null.
inline SslCtxPtr ShareSslCtx(SSL_CTX* ctx) {
  if (ctx == nullptr || SSL_CTX_up_ref(ctx) != 1) return nullptr;
  return SslCtxPtr(ctx);
}

}  // namespace space::gateway
