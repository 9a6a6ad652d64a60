#include "gateway/ca.h"

#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>

#include <sys/stat.h>

#include "common/syscall.h"

namespace space::gateway {
namespace {

constexpr size_t kMaxContexts = 1024;

EvpPkeyPtr NewKey() { return EvpPkeyPtr(EVP_EC_gen("P-256")); }

bool AddExt(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509ExtensionPtr ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value));
  return ext != nullptr && X509_add_ext(cert, ext.get(), -1) == 1;
}

bool RandomSerial(X509* cert) {
  unsigned char buf[16];
  if (RAND_bytes(buf, sizeof buf) != 1) return false;
  buf[0] &= 0x7f;
  BignumPtr bn(BN_bin2bn(buf, sizeof buf, nullptr));
  return bn != nullptr && BN_to_ASN1_INTEGER(bn.get(), X509_get_serialNumber(cert)) != nullptr;
}

// What a memory BIO holds, as a string.
std::string MemBioText(BIO* bio) {
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<size_t>(n));
}

Result<std::string> ToPem(X509* cert) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_X509(bio.get(), cert) != 1) return Internal("PEM_write_bio_X509: " + OpenSslError());
  return MemBioText(bio.get());
}

Result<std::string> KeyToPem(EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return Internal("PEM_write_bio_PrivateKey: " + OpenSslError());
  }
  return MemBioText(bio.get());
}

// Parses PEM text; null (and the reason in OpenSSL's error queue) when it holds no key or
// no certificate.
EvpPkeyPtr ReadKeyPem(const std::string& pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) return nullptr;
  return EvpPkeyPtr(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
}

X509Ptr ReadCertPem(const std::string& pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) return nullptr;
  return X509Ptr(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
}

}  // namespace

std::string OpenSslError() {
  unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "unknown error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

CertAuthority::~CertAuthority() = default;

Result<std::unique_ptr<CertAuthority>> CertAuthority::FromPem(const std::string& cert_pem, const std::string& key_pem) {
  std::unique_ptr<CertAuthority> ca(new CertAuthority());
  ca->ca_key_ = ReadKeyPem(key_pem);
  ca->ca_cert_ = ReadCertPem(cert_pem);
  if (!ca->ca_key_ || !ca->ca_cert_) return InvalidArgument("gateway CA PEM is unreadable: " + OpenSslError());
  if (X509_check_private_key(ca->ca_cert_.get(), ca->ca_key_.get()) != 1) {
    return InvalidArgument("gateway CA key does not match its certificate: " + OpenSslError());
  }
  ca->cert_pem_ = cert_pem;
  ca->leaf_key_ = NewKey();
  if (!ca->leaf_key_) return Internal("gateway leaf key: " + OpenSslError());
  return ca;
}

Result<std::pair<std::string, std::string>> CertAuthority::LoadOrCreatePem(const std::string& dir) {
  ASSIGN_OR_RETURN(std::unique_ptr<CertAuthority> ca, LoadOrCreate(dir));
  ASSIGN_OR_RETURN(std::string key_pem, ReadFileToString(dir + "/ca.key", 64 << 10));
  return std::make_pair(ca->certificate_pem(), std::move(key_pem));
}

Result<std::unique_ptr<CertAuthority>> CertAuthority::LoadOrCreate(const std::string& dir) {
  RETURN_IF_ERROR(MakeDirs(dir, 0700));
  std::unique_ptr<CertAuthority> ca(new CertAuthority());
  const std::string key_path = dir + "/ca.key", cert_path = dir + "/ca.crt";
  auto key_pem = ReadFileToString(key_path, 64 << 10);
  auto cert_pem = ReadFileToString(cert_path, 64 << 10);
  if (key_pem.ok() && cert_pem.ok()) {
    ca->ca_key_ = ReadKeyPem(*key_pem);
    ca->ca_cert_ = ReadCertPem(*cert_pem);
    if (!ca->ca_key_ || !ca->ca_cert_) return Internal("gateway CA in " + dir + " is unreadable: " + OpenSslError());
    ca->cert_pem_ = *cert_pem;
  } else {
    ca->ca_key_ = NewKey();
    ca->ca_cert_.reset(X509_new());
    X509* c = ca->ca_cert_.get();
    if (!ca->ca_key_ || !c) return Internal("gateway CA key: " + OpenSslError());
    X509_set_version(c, 2);
    X509_NAME* name = X509_get_subject_name(c);
    X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("SPACE"), -1, -1, 0);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>("SPACE egress gateway CA"), -1, -1, 0);
    X509_set_issuer_name(c, name);
    X509_gmtime_adj(X509_getm_notBefore(c), -3600);
    X509_gmtime_adj(X509_getm_notAfter(c), 10L * 365 * 24 * 3600);
    if (!RandomSerial(c) || X509_set_pubkey(c, ca->ca_key_.get()) != 1 ||
        !AddExt(c, c, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") ||
        !AddExt(c, c, NID_key_usage, "critical,keyCertSign,cRLSign") ||
        !AddExt(c, c, NID_subject_key_identifier, "hash") || X509_sign(c, ca->ca_key_.get(), EVP_sha256()) == 0) {
      return Internal("gateway CA certificate: " + OpenSslError());
    }
    ASSIGN_OR_RETURN(std::string key_text, KeyToPem(ca->ca_key_.get()));
    ASSIGN_OR_RETURN(ca->cert_pem_, ToPem(c));
    RETURN_IF_ERROR(WriteFileAtomic(key_path, key_text, 0600));
    RETURN_IF_ERROR(WriteFileAtomic(cert_path, ca->cert_pem_, 0644));
  }
  ca->leaf_key_ = NewKey();
  if (!ca->leaf_key_) return Internal("gateway leaf key: " + OpenSslError());
  return ca;
}

Result<SslCtxPtr> CertAuthority::ServerContextFor(const std::string& host) {
  MutexLock lock(&mu_);
  auto it = contexts_.find(host);
  if (it == contexts_.end()) {
    ASSIGN_OR_RETURN(SslCtxPtr minted, Mint(host));
    // Eviction drops only the cache's reference: a caller still holding the evicted context
    // keeps it alive (ServerContextFor hands out references of their own).
    if (contexts_.size() >= kMaxContexts) contexts_.erase(contexts_.begin());
    it = contexts_.emplace(host, std::move(minted)).first;
  }
  SslCtxPtr ref = ShareSslCtx(it->second.get());
  if (!ref) return Internal("SSL_CTX_up_ref: " + OpenSslError());
  return ref;
}

Result<SslCtxPtr> CertAuthority::Mint(const std::string& host) {
  // The name goes into an extension's config string: anything but a DNS name could add
  // fields of its own choosing.
  if (host.empty() || host.size() > 253 ||
      host.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789.-") != std::string::npos) {
    return InvalidArgument("refusing to mint a certificate for a name that is not a DNS name");
  }
  X509Ptr cert(X509_new());
  if (!cert) return Internal("X509_new: " + OpenSslError());
  X509* c = cert.get();
  X509* issuer = ca_cert_.get();
  X509_set_version(c, 2);
  X509_NAME* name = X509_get_subject_name(c);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(host.c_str()), -1, -1, 0);
  X509_set_issuer_name(c, X509_get_subject_name(issuer));
  X509_gmtime_adj(X509_getm_notBefore(c), -3600);
  X509_gmtime_adj(X509_getm_notAfter(c), 7L * 24 * 3600);
  std::string san = "DNS:" + host;
  bool ok = RandomSerial(c) && X509_set_pubkey(c, leaf_key_.get()) == 1 &&
            AddExt(c, issuer, NID_basic_constraints, "CA:FALSE") &&
            AddExt(c, issuer, NID_key_usage, "critical,digitalSignature") &&
            AddExt(c, issuer, NID_ext_key_usage, "serverAuth") &&
            AddExt(c, issuer, NID_subject_alt_name, san.c_str()) && X509_sign(c, ca_key_.get(), EVP_sha256()) != 0;
  if (!ok) return Internal("mint certificate for " + host + ": " + OpenSslError());
  // The context takes references of its own to the certificates and the key.
  SslCtxPtr ctx(SSL_CTX_new(TLS_server_method()));
  if (!ctx || SSL_CTX_use_certificate(ctx.get(), c) != 1 || SSL_CTX_use_PrivateKey(ctx.get(), leaf_key_.get()) != 1 ||
      SSL_CTX_add1_chain_cert(ctx.get(), issuer) != 1) {
    return Internal("server context for " + host + ": " + OpenSslError());
  }
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  return ctx;
}

}  // namespace space::gateway
