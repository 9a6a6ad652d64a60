#include "credentials/secret_box.h"

#include "common/base64.h"

#include <gtest/gtest.h>

#include "credentials/credential.h"

namespace space::credentials {
namespace {

Kek TestKek(char fill) { return std::move(Kek::FromHex(std::string(64, fill))).value(); }

TEST(SecretBox, RoundTrips) {
  Kek kek = TestKek('1');
  std::string aad = CredentialAad("team_1", "openai");
  for (const std::string& plain : {std::string(""), std::string("sk-abc"), std::string(kMaxSealedPlaintext, 'x'),
                                   std::string("\0binary\xff", 8)}) {
    auto sealed = Seal(kek, plain, aad);
    ASSERT_TRUE(sealed.ok()) << sealed.status().ToString();
    EXPECT_EQ(sealed->rfind("v1:", 0), 0u);
    auto opened = Open(kek, *sealed, aad);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    EXPECT_EQ(*opened, plain);
  }
}

TEST(SecretBox, RefusesOversizedPlaintext) {
  auto sealed = Seal(TestKek('1'), std::string(kMaxSealedPlaintext + 1, 'x'), "aad");
  EXPECT_EQ(sealed.status().code(), StatusCode::kInvalidArgument);
}

TEST(SecretBox, SealsOfTheSamePlaintextDiffer) {
  Kek kek = TestKek('1');
  auto a = Seal(kek, "same secret", "aad");
  auto b = Seal(kek, "same secret", "aad");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(*a, *b);
  EXPECT_EQ(a->find("same secret"), std::string::npos);
}

TEST(SecretBox, EveryFlippedByteFailsToOpen) {
  Kek kek = TestKek('1');
  auto sealed = Seal(kek, "sk-secret-value", "aad");
  ASSERT_TRUE(sealed.ok());
  auto decoded = Base64Decode(sealed->substr(3));
  ASSERT_TRUE(decoded.ok());
  std::string raw = *decoded;
  for (size_t i = 0; i < raw.size(); ++i) {  // nonce, ciphertext and tag alike
    std::string tampered = raw;
    tampered[i] ^= 0x01;
    auto opened = Open(kek, "v1:" + Base64Encode(tampered), "aad");
    EXPECT_FALSE(opened.ok()) << "byte " << i;
  }
}

TEST(SecretBox, RefusesWrongKeyAadAndMalformedInput) {
  Kek kek = TestKek('1');
  std::string aad = CredentialAad("team_1", "openai");
  auto sealed = Seal(kek, "sk-secret", aad);
  ASSERT_TRUE(sealed.ok());
  struct Case {
    const char* what;
    std::string sealed, aad;
    bool other_key;
  } cases[] = {
      {"wrong key", *sealed, aad, true},
      {"other credential name", *sealed, CredentialAad("team_1", "github"), false},
      {"other team", *sealed, CredentialAad("team_2", "openai"), false},
      {"empty aad", *sealed, "", false},
      {"no version", sealed->substr(3), aad, false},
      {"unknown version", "v2:" + sealed->substr(3), aad, false},
      {"truncated", sealed->substr(0, sealed->size() - 4), aad, false},
      {"too short", "v1:AAAA", aad, false},
      {"not base64", "v1:!!!!", aad, false},
      {"empty", "", aad, false},
  };
  Kek other = TestKek('2');
  for (const auto& c : cases) {
    auto opened = Open(c.other_key ? other : kek, c.sealed, c.aad);
    ASSERT_FALSE(opened.ok()) << c.what;
    EXPECT_EQ(opened.status().code(), StatusCode::kInvalidArgument) << c.what;
  }
}

TEST(SecretBox, AadEncodingIsUnambiguous) {
  EXPECT_NE(CredentialAad("ab", "c"), CredentialAad("a", "bc"));
  EXPECT_NE(CredentialAad("a|1:b", "c"), CredentialAad("a", "b|1:c"));
}

}  // namespace
}  // namespace space::credentials
