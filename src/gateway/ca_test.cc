// The CA a gateway worker that never runs as root is given as text (LoadOrCreatePem, FromPem),
// and the lifetime of the server contexts it hands out.
#include "gateway/ca.h"

#include <stdlib.h>
#include <sys/socket.h>

#include <openssl/pem.h>
#include <openssl/x509.h>

#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "common/unique_fd.h"
#include "gateway/openssl_ptr.h"
#include "gateway/stream.h"

namespace space::gateway {
namespace {

std::string TempDir() {
  char tmpl[] = "/tmp/ca_test.XXXXXX";
  EXPECT_NE(::mkdtemp(tmpl), nullptr);
  return tmpl;
}

TEST(CertAuthorityTest, PemTextMakesTheSameCaAsItsFiles) {
  const std::string dir = TempDir();
  auto pem = CertAuthority::LoadOrCreatePem(dir + "/ca");
  ASSERT_TRUE(pem.ok()) << pem.status().ToString();
  auto again = CertAuthority::LoadOrCreatePem(dir + "/ca");  // loaded, not made anew
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *pem);
  auto ca = CertAuthority::FromPem(pem->first, pem->second);
  ASSERT_TRUE(ca.ok()) << ca.status().ToString();
  EXPECT_EQ((*ca)->certificate_pem(), pem->first);
  EXPECT_TRUE((*ca)->ServerContextFor("example.com").ok());

  // Another CA's key with this certificate, and text that is no PEM: refused.
  auto other = CertAuthority::LoadOrCreatePem(dir + "/other");
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(CertAuthority::FromPem(pem->first, other->second).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CertAuthority::FromPem("x", "y").status().code(), StatusCode::kInvalidArgument);
  ASSERT_EQ(std::system(("rm -rf " + dir).c_str()), 0);
}

// A TLS client handshake over `fd` (blocking) that trusts only `ca_pem` and expects a
// certificate for `host`; the handshake's error, or empty on success.
std::string ClientHandshake(int fd, const std::string& ca_pem, const std::string& host) {
  SslCtxPtr ctx(SSL_CTX_new(TLS_client_method()));
  BioPtr bio(BIO_new_mem_buf(ca_pem.data(), static_cast<int>(ca_pem.size())));
  X509Ptr ca(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (!ctx || !ca || X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx.get()), ca.get()) != 1) return "client setup";
  SslPtr ssl(SSL_new(ctx.get()));
  if (!ssl || SSL_set_fd(ssl.get(), fd) != 1 || SSL_set_tlsext_host_name(ssl.get(), host.c_str()) != 1 ||
      SSL_set1_host(ssl.get(), host.c_str()) != 1) {
    return "client SSL setup";
  }
  SSL_set_verify(ssl.get(), SSL_VERIFY_PEER, nullptr);
  if (SSL_connect(ssl.get()) != 1) {
    return "SSL_connect: " + OpenSslError() + ", verify " +
           X509_verify_cert_error_string(SSL_get_verify_result(ssl.get()));
  }
  return "";
}

// The cache holds at most 1024 names and evicts the first name in order: a context handed out
// before its eviction must stay usable (a connection thread holds it through its handshake while
// others mint contexts for other names).
TEST(CertAuthorityTest, ContextOutlivesItsEvictionFromTheCache) {
  const std::string dir = TempDir();
  auto pem = CertAuthority::LoadOrCreatePem(dir + "/ca");
  ASSERT_TRUE(pem.ok()) << pem.status().ToString();
  auto ca = CertAuthority::FromPem(pem->first, pem->second);
  ASSERT_TRUE(ca.ok()) << ca.status().ToString();
  ASSERT_EQ(std::system(("rm -rf " + dir).c_str()), 0);

  auto first = (*ca)->ServerContextFor("a.example.com");  // sorts before every n<i> name
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  for (int i = 0; i < 1024; ++i) {
    auto other = (*ca)->ServerContextFor("n" + std::to_string(i) + ".example.com");
    ASSERT_TRUE(other.ok()) << other.status().ToString();
  }

  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  UniqueFd client_fd(sv[1]);
  Status accepted = Internal("not run");
  std::thread server([&, fd = UniqueFd(sv[0])]() mutable {
    Stream s(std::move(fd));
    accepted = s.AcceptTls(first->get(), 10000);
  });
  std::string client_error = ClientHandshake(client_fd.get(), pem->first, "a.example.com");
  // Open until the server is done (TLS 1.3 session tickets follow the client's Finished), or
  // closed at once when the client gave up, so the server does not wait for its timeout.
  if (!client_error.empty()) client_fd.reset();
  server.join();
  EXPECT_EQ(client_error, "");
  EXPECT_TRUE(accepted.ok()) << accepted.ToString();

  // It was evicted: asking again mints a new context.
  auto again = (*ca)->ServerContextFor("a.example.com");
  ASSERT_TRUE(again.ok());
  EXPECT_NE(again->get(), first->get());
}

}  // namespace
}  // namespace space::gateway
