#include "guest/files.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/syscall.h"

namespace space::guest {
namespace {

class FilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/files_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { (void)DeletePath(dir_, true); }
  std::string P(const std::string& rel) const { return dir_ + "/" + rel; }
  void Write(const std::string& rel, std::string_view data) {
    ASSERT_TRUE(MakeDirs(SplitParent(P(rel)).first, 0755).ok());
    ASSERT_TRUE(WriteFileAtomic(P(rel), data, 0644).ok());
  }
  std::string dir_;
};

TEST(ParseFileOpTest, Table) {
  struct Case {
    const char* json;
    bool ok;
  };
  const Case cases[] = {
      {R"({"op":"read","path":"/a"})", true},
      {R"({"op":"write","path":"/a","mode":420})", true},
      {R"({"op":"list","path":"/","depth":8})", true},
      {R"({"op":"move","path":"/a","to":"/b"})", true},
      {R"({"op":"delete","path":"/a","recursive":true})", true},
      {R"({"op":"mkdir","path":"/a","mode":null})", true},
      {R"({"op":"stat","path":"/a"})", true},
      {R"({"op":"write","path":"/a","owner":"user"})", true},
      {R"({"op":"mkdir","path":"/a","owner":"1000"})", true},
      {R"({"op":"mkdir","path":"/a","owner":""})", false},
      {R"({"op":"mkdir","path":"/a","owner":1000})", false},
      {R"({"op":"chmod","path":"/a"})", false},
      {R"({"op":1,"path":"/a"})", false},
      {R"({"path":"/a"})", false},
      {R"({"op":"read"})", false},
      {R"({"op":"read","path":"a"})", false},
      {R"({"op":"read","path":""})", false},
      {R"({"op":"read","path":"/a\u0000b"})", false},
      {R"({"op":"read","path":["/a"]})", false},
      {R"({"op":"move","path":"/a"})", false},
      {R"({"op":"move","path":"/a","to":"b"})", false},
      {R"({"op":"write","path":"/a","mode":4096})", false},
      {R"({"op":"write","path":"/a","mode":-1})", false},
      {R"({"op":"write","path":"/a","mode":"0644"})", false},
      {R"({"op":"list","path":"/","depth":0})", false},
      {R"({"op":"list","path":"/","depth":9})", false},
      {R"({"op":"delete","path":"/a","recursive":1})", false},
      {R"([1,2])", false},
      {R"({"op":"read","path":"/)", false},
  };
  for (const Case& c : cases) {
    auto r = ParseFileOp(c.json);
    EXPECT_EQ(r.ok(), c.ok) << c.json << ": " << r.status().ToString();
  }
  auto long_path = ParseFileOp("{\"op\":\"stat\",\"path\":\"/" + std::string(4096, 'a') + "\"}");
  EXPECT_FALSE(long_path.ok());
}

TEST(SplitParentTest, Table) {
  const std::tuple<std::string, std::string, std::string> cases[] = {
      {"/a/b/c", "/a/b", "c"}, {"/a", "/", "a"}, {"/", "/", ""}, {"/a/b/", "/a", "b"}, {"//", "/", ""}};
  for (const auto& [in, parent, name] : cases) {
    EXPECT_EQ(SplitParent(in), std::make_pair(parent, name)) << in;
  }
}

TEST_F(FilesTest, WriterCommitsAtomically) {
  auto w = FileWriter::Create(P("new/sub/file.txt"), 0600);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  ASSERT_TRUE((*w)->Append("hello ").ok());
  ASSERT_TRUE((*w)->Append("world").ok());
  struct stat st;
  EXPECT_NE(::stat(P("new/sub/file.txt").c_str(), &st), 0);  // not visible before commit
  auto size = (*w)->Commit();
  ASSERT_TRUE(size.ok());
  EXPECT_EQ(*size, 11u);
  ASSERT_EQ(::stat(P("new/sub/file.txt").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(*ReadFileToString(P("new/sub/file.txt")), "hello world");
  auto listing = ListDirectory(P("new/sub"), 1);
  ASSERT_TRUE(listing.ok());
  EXPECT_EQ((*listing)["entries"].size(), 1u);  // no temp file left behind
}

TEST_F(FilesTest, AbortedWriterLeavesNothing) {
  Write("keep", "old");
  {
    auto w = FileWriter::Create(P("keep"), 0644);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Append("partial").ok());
  }
  EXPECT_EQ(*ReadFileToString(P("keep")), "old");
  auto listing = ListDirectory(dir_, 1);
  ASSERT_TRUE(listing.ok());
  EXPECT_EQ((*listing)["entries"].size(), 1u);
}

TEST_F(FilesTest, OpenForReadTable) {
  Write("f", "12345");
  ASSERT_EQ(::symlink(P("f").c_str(), P("link").c_str()), 0);
  ASSERT_EQ(::mkdir(P("d").c_str(), 0755), 0);
  ASSERT_EQ(::mkfifo(P("fifo").c_str(), 0644), 0);
  struct Case {
    std::string rel;
    StatusCode code;
  };
  const Case cases[] = {{"f", StatusCode::kOk},
                        {"link", StatusCode::kOk},
                        {"d", StatusCode::kInvalidArgument},
                        {"fifo", StatusCode::kInvalidArgument},
                        {"missing", StatusCode::kNotFound},
                        {"f/x", StatusCode::kInvalidArgument}};
  for (const Case& c : cases) {
    auto r = OpenForRead(P(c.rel));
    EXPECT_EQ(r.ok() ? StatusCode::kOk : r.status().code(), c.code) << c.rel << ": " << r.status().ToString();
    if (r.ok()) {
      EXPECT_EQ(r->size, 5u);
    }
  }
  EXPECT_NE(OpenForRead(P("d")).status().message().find("is a directory"), std::string::npos);
}

TEST_F(FilesTest, StatReportsSymlinks) {
  Write("f", "abc");
  ASSERT_EQ(::symlink("f", P("link").c_str()), 0);
  auto f = StatPath(P("f"));
  ASSERT_TRUE(f.ok());
  EXPECT_EQ((*f)["type"], "file");
  EXPECT_EQ((*f)["name"], "f");
  EXPECT_EQ((*f)["size"], 3);
  EXPECT_EQ((*f)["mode"], 0644);
  EXPECT_TRUE((*f)["mtime"].get<std::string>().ends_with("Z"));
  auto l = StatPath(P("link"));
  ASSERT_TRUE(l.ok());
  EXPECT_EQ((*l)["type"], "symlink");
  EXPECT_EQ(StatPath(P("nope")).status().code(), StatusCode::kNotFound);
  auto root = StatPath("/");
  ASSERT_TRUE(root.ok());
  EXPECT_EQ((*root)["type"], "dir");
}

TEST_F(FilesTest, ListDepths) {
  Write("a/b/c/d.txt", "x");
  Write("z.txt", "y");
  ASSERT_EQ(::symlink("/", P("rootlink").c_str()), 0);  // must not be descended into
  struct Case {
    int depth;
    std::vector<std::string> paths;
  };
  const Case cases[] = {
      {1, {"a", "rootlink", "z.txt"}},
      {2, {"a", "a/b", "rootlink", "z.txt"}},
      {8, {"a", "a/b", "a/b/c", "a/b/c/d.txt", "rootlink", "z.txt"}},
  };
  for (const Case& c : cases) {
    auto r = ListDirectory(dir_, c.depth);
    ASSERT_TRUE(r.ok());
    std::vector<std::string> got;
    for (const auto& e : (*r)["entries"]) got.push_back(e["path"].get<std::string>().substr(dir_.size() + 1));
    EXPECT_EQ(got, c.paths) << "depth " << c.depth;
  }
  EXPECT_EQ(ListDirectory(P("z.txt"), 1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ListDirectory(P("missing"), 1).status().code(), StatusCode::kNotFound);
}

TEST_F(FilesTest, ListCapsEntries) {
  ASSERT_EQ(::mkdir(P("many").c_str(), 0755), 0);
  for (size_t i = 0; i < kMaxListEntries + 5; ++i) {
    UniqueFd fd(::open(P("many/" + std::to_string(i)).c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
    ASSERT_TRUE(fd.valid());
  }
  auto r = ListDirectory(P("many"), 1);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)["entries"].size(), kMaxListEntries);
}

TEST_F(FilesTest, MkdirMoveDelete) {
  ASSERT_TRUE(MakeDirectory(P("x/y/z"), 0755).ok());
  EXPECT_TRUE(MakeDirectory(P("x/y/z"), 0755).ok());  // idempotent
  Write("x/y/z/f", "1");
  EXPECT_EQ(MakeDirectory(P("x/y/z/f"), 0755).code(), StatusCode::kInvalidArgument);

  ASSERT_TRUE(MovePath(P("x/y/z/f"), P("moved/deeper/g")).ok());
  EXPECT_EQ(*ReadFileToString(P("moved/deeper/g")), "1");
  EXPECT_EQ(MovePath(P("nope"), P("nope2")).code(), StatusCode::kNotFound);

  EXPECT_EQ(DeletePath(P("x"), false).code(), StatusCode::kConflict);  // not empty
  // Recursive delete must remove the link, not what it points to.
  Write("outside/precious", "keep");
  ASSERT_EQ(::symlink(P("outside").c_str(), P("x/y/link").c_str()), 0);
  ASSERT_TRUE(DeletePath(P("x"), true).ok());
  EXPECT_EQ(*ReadFileToString(P("outside/precious")), "keep");
  struct stat st;
  EXPECT_NE(::lstat(P("x").c_str(), &st), 0);
  EXPECT_TRUE(DeletePath(P("moved/deeper/g"), false).ok());
  EXPECT_TRUE(DeletePath(P("moved/deeper"), false).ok());
  EXPECT_EQ(DeletePath(P("missing"), true).code(), StatusCode::kNotFound);
  EXPECT_EQ(DeletePath("/", true).code(), StatusCode::kInvalidArgument);
}

TEST_F(FilesTest, OwnerGetsWhatTheOpCreatesOnly) {
  if (::geteuid() != 0) GTEST_SKIP() << "chown needs root";
  ASSERT_TRUE(MakeDirectory(P("pre"), 0755).ok());
  const Owner owner{4321, 4322};
  ASSERT_TRUE(MakeDirectory(P("pre/a/b"), 0755, owner).ok());
  struct stat st;
  ASSERT_EQ(::stat(P("pre").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);  // existed before: unchanged
  ASSERT_EQ(::stat(P("pre/a/b").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 4321u);
  EXPECT_EQ(st.st_gid, 4322u);
  auto w = FileWriter::Create(P("pre/c/f"), 0644, owner);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->Append("x").ok());
  ASSERT_TRUE((*w)->Commit().ok());
  ASSERT_EQ(::stat(P("pre/c/f").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 4321u);
  ASSERT_EQ(::stat(P("pre/c").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 4321u);
  Write("pre/file", "1");
  EXPECT_FALSE(MakeDirectory(P("pre/file"), 0755, owner).ok());
}

}  // namespace
}  // namespace space::guest
