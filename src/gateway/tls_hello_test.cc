#include "gateway/tls_hello.h"

#include <openssl/ssl.h>

#include <gtest/gtest.h>

namespace space::gateway {
namespace {

// A real ClientHello, as OpenSSL writes it.
std::string ClientHello(const char* sni) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL* ssl = SSL_new(ctx);
  BIO* rbio = BIO_new(BIO_s_mem());
  BIO* wbio = BIO_new(BIO_s_mem());
  SSL_set_bio(ssl, rbio, wbio);
  if (sni) SSL_set_tlsext_host_name(ssl, sni);
  SSL_connect(ssl);
  char* data;
  long n = BIO_get_mem_data(wbio, &data);
  std::string out(data, static_cast<size_t>(n));
  SSL_free(ssl);
  SSL_CTX_free(ctx);
  return out;
}

TEST(TlsHelloTest, ReadsServerName) {
  std::string hello = ClientHello("API.example.org");
  std::string sni;
  ASSERT_EQ(ParseClientHelloSni(hello, &sni), HelloResult::kSni);
  EXPECT_EQ(sni, "api.example.org");
  ASSERT_EQ(ParseClientHelloSni(ClientHello(nullptr), &sni), HelloResult::kNoSni);
}

TEST(TlsHelloTest, PartialAndForeignInput) {
  std::string hello = ClientHello("a.test");
  std::string sni;
  for (size_t cut : {size_t{1}, size_t{4}, size_t{5}, hello.size() / 2, hello.size() - 1}) {
    EXPECT_EQ(ParseClientHelloSni(hello.substr(0, cut), &sni), HelloResult::kNeedMore) << cut;
  }
  EXPECT_EQ(ParseClientHelloSni("GET / HTTP/1.1\r\n", &sni), HelloResult::kNotTls);
  // Every truncation of the inner lengths, by corrupting each byte: never a crash.
  for (size_t i = 5; i < hello.size(); ++i) {
    std::string bad = hello;
    bad[i] = static_cast<char>(0xff);
    (void)ParseClientHelloSni(bad, &sni);
  }
}

}  // namespace
}  // namespace space::gateway
