// The node's certificate authority for TLS interception: the gateway presents a certificate
// minted for the requested name, signed by this CA, to sandboxes that trust it. Only used for
// hosts a credential is bound to. The CA key stays in the node's data dir (mode 0600) and
// never enters a sandbox; sandboxes get the certificate only. Owned by the gateway;
// thread-safe.
#pragma once

#include <openssl/ssl.h>

#include <map>
#include <memory>
#include <string>
#include <utility>

#include "common/mutex.h"
#include "common/result.h"
#include "gateway/openssl_ptr.h"

namespace space::gateway {

class CertAuthority {
 public:
  // Loads <dir>/ca.key and <dir>/ca.crt, creating both (P-256, ten years) when absent.
  static Result<std::unique_ptr<CertAuthority>> LoadOrCreate(const std::string& dir);
  // The same, then the two files' text {certificate, key}: what a gateway worker that never
  // runs as root is given, since it cannot read the 0600 key itself.
  static Result<std::pair<std::string, std::string>> LoadOrCreatePem(const std::string& dir);
  // A CA from PEM text (a certificate and its private key).
  static Result<std::unique_ptr<CertAuthority>> FromPem(const std::string& cert_pem, const std::string& key_pem);
  ~CertAuthority();

  const std::string& certificate_pem() const { return cert_pem_; }
  // A server context presenting a certificate for `host` (cached; at most 1024 names). The
  // handle is the caller's own reference: the cache may drop the context meanwhile (evicted
  // for another name), and it stays valid for as long as the caller holds it.
  Result<SslCtxPtr> ServerContextFor(const std::string& host) EXCLUDES(mu_);

 private:
  CertAuthority() = default;
  Result<SslCtxPtr> Mint(const std::string& host) REQUIRES(mu_);

  EvpPkeyPtr ca_key_;
  X509Ptr ca_cert_;
  EvpPkeyPtr leaf_key_;  // one key for every minted leaf, made at start
  std::string cert_pem_;
  Mutex mu_;
  std::map<std::string, SslCtxPtr> contexts_ GUARDED_BY(mu_);
};

// The last OpenSSL error as text, and the error queue cleared.
std::string OpenSslError();

}  // namespace space::gateway
