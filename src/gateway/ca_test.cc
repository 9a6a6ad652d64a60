// The CA a gateway worker that never runs as root is given as text (LoadOrCreatePem, FromPem).
#include "gateway/ca.h"

#include <stdlib.h>

#include <string>

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace space::gateway
