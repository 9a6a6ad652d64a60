// S3BlobStore against a real S3 server: Ceph RGW started by scripts/s3-test-cluster.sh
// (`make unit` runs ctest inside one). Without SPACE_TEST_S3_URL the server tests skip, unless
// SPACE_TEST_S3_REQUIRED is set, when they fail. Every test works under its own random prefix.
#include "snapshot/s3_blob_store.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <set>

#include "common/random.h"
#include "snapshot/exporter.h"
#include "snapshot/gc.h"
#include "snapshot/restorer.h"
#include "snapshot/test_util.h"

namespace space::snapshot {
namespace {

using namespace testing;  // NOLINT: test helpers

const std::string kHexA = "ab" + std::string(62, '1');
const std::string kHexB = "cd" + std::string(62, '2');

TEST(S3Location, ParsesBucketPrefixEndpointAndRegion) {
  auto l = ParseS3Location("s3://my-bucket/a/b?endpoint=http://127.0.0.1:9000/&region=eu-west-1");
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->bucket, "my-bucket");
  EXPECT_EQ(l->prefix, "a/b/");
  EXPECT_EQ(l->endpoint, "http://127.0.0.1:9000");
  EXPECT_EQ(l->region, "eu-west-1");
  auto bare = ParseS3Location("s3://bkt?endpoint=https%3A%2F%2Fs3.example");
  ASSERT_TRUE(bare.ok()) << bare.status().ToString();
  EXPECT_EQ(bare->prefix, "");
  EXPECT_EQ(bare->endpoint, "https://s3.example");
  EXPECT_EQ(bare->region, "us-east-1");
}

TEST(S3Location, RefusesCredentialsAndMalformedParts) {
  const char* bad[] = {
      "http://bucket?endpoint=http://h",             // not s3://
      "s3://bucket",                                 // no endpoint
      "s3://AK:SK@bucket?endpoint=http://h",         // credentials in the URL
      "s3://bucket?endpoint=http://AK:SK@h",         // credentials in the endpoint
      "s3://bucket?endpoint=http://h&secret_key=x",  // unknown parameter
      "s3://bucket?endpoint=ftp://h",                // scheme
      "s3://bucket?endpoint=http://h/path",          // a path in the endpoint
      "s3://Bucket?endpoint=http://h",               // bucket charset
      "s3://ab?endpoint=http://h",                   // bucket too short
      "s3://bucket/../x?endpoint=http://h",          // prefix traversal
      "s3://bucket/a//b?endpoint=http://h",          // empty segment
      "s3://bucket?endpoint=http://h&region=EU_1",   // region charset
      "s3://bucket?endpoint=http%ZZ",                // escape
  };
  for (const char* url : bad) EXPECT_FALSE(ParseS3Location(url).ok()) << url;
}

TEST(S3Location, ToStringHoldsNoCredentials) {
  auto l = ParseS3Location("s3://bkt/p?endpoint=http://h:1");
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->ToString(), "s3://bkt/p/?endpoint=http://h:1&region=us-east-1");
}

TEST(S3Credentials, FromAFileThatOnlyTheOwnerReads) {
  TempDir dir;
  const std::string f = dir.Sub("creds.json");
  WriteFile(f, R"({"access_key_id":"AK1","secret_access_key":"SK1"})", 0600);
  auto c = LoadS3Credentials(f);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->access_key_id, "AK1");
  EXPECT_EQ(c->secret_access_key, "SK1");
  ASSERT_EQ(::chmod(f.c_str(), 0644), 0);
  EXPECT_EQ(LoadS3Credentials(f).status().code(), StatusCode::kPermissionDenied);
  WriteFile(f, R"({"access_key_id":"A:K","secret_access_key":"SK"})", 0600);
  EXPECT_FALSE(LoadS3Credentials(f).ok());
  WriteFile(f, "not json", 0600);
  EXPECT_FALSE(LoadS3Credentials(f).ok());
}

class S3BlobStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* url = std::getenv("SPACE_TEST_S3_URL");
    if (url == nullptr || *url == '\0') {
      if (std::getenv("SPACE_TEST_S3_REQUIRED") != nullptr) FAIL() << "SPACE_TEST_S3_URL is not set";
      GTEST_SKIP() << "no S3 server (run under scripts/s3-test-cluster.sh)";
    }
    auto loc = ParseS3Location(url);
    ASSERT_TRUE(loc.ok()) << loc.status().ToString();
    location_ = *loc;
    location_.prefix += "t" + RandomHex(6) + "/";
    creds_.access_key_id = std::getenv("SPACE_TEST_S3_ACCESS_KEY");
    creds_.secret_access_key = std::getenv("SPACE_TEST_S3_SECRET_KEY");
    store_ = OpenStore(options_);
  }

  std::unique_ptr<S3BlobStore> OpenStore(const S3Options& options) {
    auto s = S3BlobStore::Open(location_, creds_, options);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(s).value() : nullptr;
  }

  S3Location location_;
  S3Credentials creds_;
  S3Options options_;
  std::unique_ptr<S3BlobStore> store_;
  std::mt19937_64 rng_{7};
};

TEST_F(S3BlobStoreTest, PutGetExistsDeleteEveryKeyShape) {
  for (const std::string& key : {ObjectKey(kHexA), ManifestKey("snap-1"), TemplateKey("app")}) {
    SCOPED_TRACE(key);
    EXPECT_FALSE(*store_->Exists(key));
    EXPECT_EQ(store_->Get(key, 1024).status().code(), StatusCode::kNotFound);
    const std::string value = RandomBytes(rng_, 3000);
    ASSERT_TRUE(store_->Put(key, value).ok());
    EXPECT_TRUE(*store_->Exists(key));
    auto got = store_->Get(key, 1 << 20);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(*got, value);
    EXPECT_EQ(store_->Get(key, 100).status().code(), StatusCode::kPayloadTooLarge);
    ASSERT_TRUE(store_->Delete(key).ok());
    EXPECT_FALSE(*store_->Exists(key));
    EXPECT_TRUE(store_->Delete(key).ok()) << "deleting an absent key is OK";
  }
  EXPECT_EQ(store_->Put("objects/../../x", "v").code(), StatusCode::kInvalidArgument);
  EXPECT_GT(store_->stats().requests, 10u);
  EXPECT_GE(store_->stats().bytes_sent, 9000u);
}

TEST_F(S3BlobStoreTest, AManifestIsWrittenOnceAndNeverReplaced) {
  const std::string key = ManifestKey("once");
  ASSERT_TRUE(store_->Put(key, "first").ok());
  EXPECT_TRUE(store_->Put(key, "first").ok()) << "the same bytes again (a retried write) are fine";
  Status other = store_->Put(key, "second");
  EXPECT_EQ(other.code(), StatusCode::kConflict) << other.ToString();
  EXPECT_EQ(*store_->Get(key, 100), "first");
  // A template record is a name's current value: a rebuild replaces it.
  ASSERT_TRUE(store_->Put(TemplateKey("t"), "v1").ok());
  ASSERT_TRUE(store_->Put(TemplateKey("t"), "v2").ok());
  EXPECT_EQ(*store_->Get(TemplateKey("t"), 100), "v2");
}

TEST_F(S3BlobStoreTest, ListsEveryPageAndOnlyItsOwnPrefix) {
  std::set<std::string> want;
  for (int i = 0; i < 7; ++i) {
    std::string hex = RandomHex(32);
    ASSERT_TRUE(store_->Put(ObjectKey(hex), "x").ok());
    want.insert(ObjectKey(hex));
  }
  ASSERT_TRUE(store_->Put(ManifestKey("m1"), "{}").ok());
  // Another prefix in the same bucket is another store.
  S3Location other_loc = location_;
  other_loc.prefix += "other/";
  auto other = S3BlobStore::Open(other_loc, creds_);
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE((*other)->Put(ObjectKey(kHexB), "y").ok());

  S3Options small_pages;
  small_pages.list_page_keys = 3;
  auto paged = OpenStore(small_pages);
  ASSERT_NE(paged, nullptr);
  auto objects = paged->List(kObjectsPrefix);
  ASSERT_TRUE(objects.ok()) << objects.status().ToString();
  EXPECT_EQ(std::set<std::string>(objects->begin(), objects->end()), want);
  auto manifests = paged->List(kManifestsPrefix);
  ASSERT_TRUE(manifests.ok());
  EXPECT_EQ(*manifests, std::vector<std::string>{ManifestKey("m1")});
  EXPECT_EQ((*other)->List(kObjectsPrefix)->size(), 1u);
}

TEST_F(S3BlobStoreTest, LargeValuesGoUpInPartsAndComeBackWhole) {
  S3Options multipart;
  multipart.multipart_threshold = 6u << 20;
  multipart.part_size = 5u << 20;
  auto store = OpenStore(multipart);
  ASSERT_NE(store, nullptr);
  const std::string value = RandomBytes(rng_, (13u << 20) + 17);
  const uint64_t before = store->stats().requests;
  ASSERT_TRUE(store->Put(ObjectKey(kHexA), value).ok());
  EXPECT_EQ(store->stats().requests - before, 5u) << "initiate, three parts, complete";
  auto got = store->Get(ObjectKey(kHexA), value.size());
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(*got == value);
  EXPECT_EQ(*store->RemoveStaleTemp(0), 0u) << "a completed upload leaves nothing to abort";
}

// Initiates a multipart upload of `key` and walks away from it, as a node killed mid-Put does.
std::string AbandonUpload(const S3Location& loc, const S3Credentials& c, const std::string& key) {
  CURL* h = curl_easy_init();
  std::string body;
  const std::string url = loc.endpoint + "/" + loc.bucket + "/" + loc.prefix + key + "?uploads=";
  const std::string sigv4 = "aws:amz:" + loc.region + ":s3";
  curl_slist* headers = curl_slist_append(nullptr, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_AWS_SIGV4, sigv4.c_str());
  curl_easy_setopt(h, CURLOPT_USERNAME, c.access_key_id.c_str());
  curl_easy_setopt(h, CURLOPT_PASSWORD, c.secret_access_key.c_str());
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
  curl_easy_setopt(
      h, CURLOPT_WRITEFUNCTION, +[](char* d, size_t s, size_t n, void* u) {
        static_cast<std::string*>(u)->append(d, s * n);
        return s * n;
      });
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &body);
  CURLcode rc = curl_easy_perform(h);
  curl_slist_free_all(headers);
  curl_easy_cleanup(h);
  return rc == CURLE_OK ? body : "";
}

TEST_F(S3BlobStoreTest, RemoveStaleTempAbortsAbandonedUploadsOnlyWhenOld) {
  const std::string body = AbandonUpload(location_, creds_, ObjectKey(kHexB));
  ASSERT_NE(body.find("<UploadId>"), std::string::npos) << body;
  EXPECT_EQ(*store_->RemoveStaleTemp(60 * 60 * 1000), 0u) << "young: it may be a Put in flight";
  auto removed = store_->RemoveStaleTemp(-60 * 1000);  // the server's clock may lag ours
  ASSERT_TRUE(removed.ok()) << removed.status().ToString();
  EXPECT_EQ(*removed, 1u);
  EXPECT_EQ(*store_->RemoveStaleTemp(-60 * 1000), 0u);
  EXPECT_FALSE(*store_->Exists(ObjectKey(kHexB)));
}

TEST_F(S3BlobStoreTest, AWrongSecretIsRefusedAtOpenWithTheServersReason) {
  S3Credentials wrong = creds_;
  wrong.secret_access_key += "x";
  auto s = S3BlobStore::Open(location_, wrong);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kPermissionDenied) << s.status().ToString();
  // The message names the store, never the secret.
  EXPECT_EQ(s.status().message().find(wrong.secret_access_key), std::string::npos);
  S3Location missing = location_;
  missing.bucket = "no-such-bucket-" + RandomHex(4);
  EXPECT_EQ(S3BlobStore::Open(missing, creds_).status().code(), StatusCode::kNotFound);
}

TEST_F(S3BlobStoreTest, AnUnreachableServerFailsAfterItsRetries) {
  S3Location dead = location_;
  dead.endpoint = "http://127.0.0.1:1";
  S3Options quick;
  quick.attempts = 3;
  quick.backoff_ms = 50;
  const auto t0 = std::chrono::steady_clock::now();
  auto s = S3BlobStore::Open(dead, creds_, quick);
  ASSERT_FALSE(s.ok());
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(150)) << "two backoffs: 50 + 100 ms";
  EXPECT_EQ(s.status().code(), StatusCode::kUnavailable) << s.status().ToString();
}

TEST_F(S3BlobStoreTest, ExportRestoreIncrementalAndGcThroughTheBucket) {
  TempDir tmp;
  const std::string tree = tmp.Sub("tree");
  WriteFile(tree + "/a.txt", "hello\n", 0640);
  WriteFile(tree + "/big.bin", RandomBytes(rng_, 9u << 20));
  WriteFile(tree + "/d/e/f", "deep", 0600);
  auto full = Export(tree, "s1", "", *store_);
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  WriteFile(tree + "/new.bin", RandomBytes(rng_, 5u << 20));
  auto inc = Export(tree, "s2", "s1", *store_);
  ASSERT_TRUE(inc.ok()) << inc.status().ToString();
  EXPECT_LT(inc->objects_written, full->objects_written + 3) << "only the new file's chunks";
  const bool root = ::geteuid() == 0;
  const std::string dest = tmp.Sub("dest");
  fs::create_directories(dest);
  Status st = Restore("s2", *store_, dest, RestoreOptions{.preserve_owner = root});
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(Fingerprint(dest, root), Fingerprint(tree, root));

  // s1 goes: its chunks that s2 shares stay, and s2 still restores.
  ASSERT_TRUE(DeleteManifest(*store_, "s1").ok());
  auto gc = CollectGarbage(*store_);
  ASSERT_TRUE(gc.ok()) << gc.status().ToString();
  EXPECT_EQ(gc->manifests, 1u);
  EXPECT_EQ(gc->objects_deleted, 0u) << "s2 is self-contained: it references every chunk s1 had";
  const std::string dest2 = tmp.Sub("dest2");
  fs::create_directories(dest2);
  ASSERT_TRUE(Restore("s2", *store_, dest2, RestoreOptions{.preserve_owner = root}).ok());
  ASSERT_TRUE(DeleteManifest(*store_, "s2").ok());
  gc = CollectGarbage(*store_);
  ASSERT_TRUE(gc.ok());
  EXPECT_GT(gc->objects_deleted, 0u);
  EXPECT_TRUE(store_->List(kObjectsPrefix)->empty());
}

}  // namespace
}  // namespace space::snapshot
