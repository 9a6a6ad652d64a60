// The template builder's steps resolve every path beneath the tree without following a
// symlink (a debootstrapped tree's own links may point anywhere on the host), refuse FIFOs
// where they read or write account files, and an import keeps what a template needs of its
// source and leaves out what belongs to the host. Run here as root through RunToolHere; the
// same steps in the build jail: node/build_jail_test.cc, tests/integration/test_templates.py.
#include "storage/template_builder.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "common/subprocess.h"
#include "common/syscall.h"
#include "storage/fs_util.h"

namespace space::storage {
namespace {

class TemplateBuilderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (chown to 1000, device nodes)";
    char tmpl[] = "/var/tmp/template-builder-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    tree_ = dir_ + "/tree";
    ASSERT_EQ(::mkdir(tree_.c_str(), 0755), 0);
  }
  void TearDown() override {
    if (!dir_.empty()) (void)std::system(("rm -rf " + dir_).c_str());
  }
  Status Step(const std::string& name) { return RunTreeStep({name, tree_}, nullptr); }

  std::string dir_, tree_;
};

TEST_F(TemplateBuilderTest, StepsNeverWriteThroughATreesSymlinks) {
  ASSERT_TRUE(Step("@base-prepare").ok());
  // The tree's etc becomes a link to a host directory after the build tool ran.
  const std::string host = dir_ + "/host-etc";
  ASSERT_TRUE(MakeDirs(host + "/dpkg/dpkg.cfg.d", 0755).ok());
  ASSERT_TRUE(WriteFileAtomic(host + "/passwd", "root:x:0:0::/root:/bin/sh\n", 0644).ok());
  ASSERT_TRUE(WriteFileAtomic(host + "/dpkg/dpkg.cfg.d/space-build-unsafe-io", "keep\n", 0644).ok());
  ASSERT_TRUE(RemoveTree(tree_ + "/etc").ok());
  ASSERT_EQ(::symlink(host.c_str(), (tree_ + "/etc").c_str()), 0);
  Status st = Step("@base-finish");
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("etc/dpkg"), std::string::npos) << st.ToString();
  EXPECT_TRUE(PathExists(host + "/dpkg/dpkg.cfg.d/space-build-unsafe-io"));
  // And past that step: home is a link to the host dir, etc a real one.
  ASSERT_EQ(::unlink((tree_ + "/etc").c_str()), 0);
  ASSERT_TRUE(Step("@base-prepare").ok());
  ASSERT_TRUE(WriteFileAtomic(tree_ + "/etc/passwd", "root:x:0:0::/root:/bin/sh\n", 0644).ok());
  ASSERT_EQ(::symlink(host.c_str(), (tree_ + "/home").c_str()), 0);
  EXPECT_FALSE(Step("@base-finish").ok());
  EXPECT_FALSE(PathExists(host + "/user"));
  Result<std::string> passwd = ReadFileToString(host + "/passwd", 4096);
  ASSERT_TRUE(passwd.ok());
  EXPECT_EQ(*passwd, "root:x:0:0::/root:/bin/sh\n");
}

TEST_F(TemplateBuilderTest, AFifoForAnAccountFileFailsInsteadOfBlocking) {
  ASSERT_TRUE(MakeDirs(tree_ + "/etc", 0755).ok());
  ASSERT_EQ(::mkfifo((tree_ + "/etc/passwd").c_str(), 0644), 0);
  Status st = Step("@busybox");
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("etc/passwd"), std::string::npos) << st.ToString();
}

TEST_F(TemplateBuilderTest, BusyboxLaysOutItsTreeAndConventions) {
  ASSERT_TRUE(Step("@busybox").ok());
  struct stat user, tmp;
  ASSERT_EQ(::lstat((tree_ + "/home/user").c_str(), &user), 0);
  EXPECT_EQ(user.st_uid, 1000u);
  ASSERT_EQ(::lstat((tree_ + "/tmp").c_str(), &tmp), 0);
  EXPECT_EQ(tmp.st_mode & 07777, 01777u);
  Result<std::string> passwd = ReadFileToString(tree_ + "/etc/passwd", 4096);
  ASSERT_TRUE(passwd.ok());
  EXPECT_NE(passwd->find("user:x:1000:1000:user:/home/user:/bin/sh"), std::string::npos) << *passwd;
  EXPECT_FALSE(Step("@nosuch").ok());
  EXPECT_FALSE(RunTreeStep({"@busybox", "relative"}, nullptr).ok());
}

// Every compression tar knows is found by its magic (tar cannot tell on a stream); the
// contents of dev/ stay out, xattrs of a template's own (user.*) come along.
TEST_F(TemplateBuilderTest, ImportsEachCompressionAndLeavesDevOut) {
  const std::string src = dir_ + "/src";
  ASSERT_TRUE(MakeDirs(src + "/dev", 0755).ok());
  ASSERT_TRUE(MakeDirs(src + "/etc", 0755).ok());
  ASSERT_EQ(::mknod((src + "/dev/null").c_str(), S_IFCHR | 0666, makedev(1, 3)), 0);
  ASSERT_TRUE(WriteFileAtomic(src + "/etc/motd", "hi\n", 0600).ok());
  ASSERT_EQ(::chown((src + "/etc/motd").c_str(), 1000, 1001), 0);
  ASSERT_EQ(::setxattr((src + "/etc/motd").c_str(), "user.origin", "src", 3, 0), 0);
  struct Case {
    const char* name;
    const char* flag;
  };
  for (const Case& c : {Case{"dir", nullptr}, Case{"t.tar", ""}, Case{"t.tgz", "--gzip"}, Case{"t.tbz", "--bzip2"},
                        Case{"t.txz", "--xz"}}) {
    SCOPED_TRACE(c.name);
    std::string source = src;
    if (c.flag) {
      source = dir_ + "/" + c.name;
      std::vector<std::string> argv = {"/bin/tar", "--create", "--xattrs", "--xattrs-include=user.*", "--file=" + source,
                                       "--directory=" + src, "."};
      if (*c.flag) argv.insert(argv.begin() + 1, c.flag);
      ASSERT_TRUE(RunProcess({argv}, nullptr).ok());
    }
    const std::string out = dir_ + "/out-" + c.name;
    ASSERT_EQ(::mkdir(out.c_str(), 0755), 0);
    Result<UniqueFd> fd = OpenImportSource("/", source);
    ASSERT_TRUE(fd.ok()) << fd.status().ToString();
    Status st = ImportTree(fd->get(), source, out, RunToolHere, nullptr);
    ASSERT_TRUE(st.ok()) << st.ToString();
    struct stat motd;
    ASSERT_EQ(::lstat((out + "/etc/motd").c_str(), &motd), 0);
    EXPECT_EQ(motd.st_uid, 1000u);
    EXPECT_EQ(motd.st_gid, 1001u);
    EXPECT_EQ(motd.st_mode & 07777, 0600u);
    char value[8] = {};
    EXPECT_EQ(::getxattr((out + "/etc/motd").c_str(), "user.origin", value, sizeof value), 3);
    EXPECT_STREQ(value, "src");
    EXPECT_TRUE(PathExists(out + "/dev"));
    EXPECT_FALSE(PathExists(out + "/dev/null"));
  }
}

TEST_F(TemplateBuilderTest, ImportRefusesAFifoAndAVmStateDir) {
  const std::string fifo = dir_ + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  Result<UniqueFd> fd = OpenImportSource("/", fifo);  // O_NONBLOCK: the open does not hang
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  Status st = ImportTree(fd->get(), fifo, tree_, RunToolHere, nullptr);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  const std::string src = dir_ + "/vm";
  ASSERT_TRUE(MakeDirs(src + "/.space-vm", 0755).ok());
  fd = OpenImportSource("/", src);
  ASSERT_TRUE(fd.ok());
  EXPECT_EQ(ImportTree(fd->get(), src, tree_, RunToolHere, nullptr).code(), StatusCode::kInvalidArgument);
}

// With an import root, a source is resolved inside it as if it were "/": a path outside it is
// refused, and neither ".." nor a symlink (absolute or relative) inside it leads out.
TEST_F(TemplateBuilderTest, ImportSourcesStayInsideTheImportRoot) {
  const std::string root = dir_ + "/imports";
  ASSERT_TRUE(MakeDirs(root + "/ok", 0755).ok());
  ASSERT_TRUE(WriteFileAtomic(root + "/ok/file", "inside\n", 0644).ok());
  ASSERT_TRUE(MakeDirs(dir_ + "/outside", 0755).ok());
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/outside/secret", "outside\n", 0644).ok());
  ASSERT_EQ(::symlink((dir_ + "/outside").c_str(), (root + "/abs").c_str()), 0);
  ASSERT_EQ(::symlink("../outside", (root + "/rel").c_str()), 0);
  EXPECT_TRUE(OpenImportSource(root, root + "/ok").ok());
  EXPECT_TRUE(OpenImportSource(root + "/", root + "/ok/file").ok());
  EXPECT_TRUE(OpenImportSource(root, root).ok());
  EXPECT_EQ(OpenImportSource(root, dir_ + "/outside").status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(OpenImportSource(root, root + "x/ok").status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(OpenImportSource(root, "relative").status().code(), StatusCode::kInvalidArgument);
  // Inside the root, these name paths that do not exist there.
  for (const std::string& escape : {root + "/abs/secret", root + "/rel/secret", root + "/../outside/secret",
                                    root + "/ok/../../outside/secret"}) {
    Result<UniqueFd> fd = OpenImportSource(root, escape);
    EXPECT_FALSE(fd.ok()) << escape;
  }
  // "/" reads anywhere, through links as the host resolves them.
  EXPECT_TRUE(OpenImportSource("/", root + "/abs/secret").ok());
}

// Several trusted sources: a source opens inside the one it is below, and a link in one leads
// to nothing in another (each is a root of its own).
TEST_F(TemplateBuilderTest, ImportSourcesStayInsideTheirTrustedSource) {
  const std::string a = dir_ + "/a", b = dir_ + "/b";
  ASSERT_TRUE(MakeDirs(a, 0755).ok());
  ASSERT_TRUE(MakeDirs(b + "/img", 0755).ok());
  ASSERT_TRUE(WriteFileAtomic(b + "/img/file", "in b\n", 0644).ok());
  ASSERT_EQ(::symlink((b + "/img").c_str(), (a + "/to-b").c_str()), 0);
  const std::string roots = a + ":" + b + "/";
  EXPECT_EQ(SplitImportRoots(roots), (std::vector<std::string>{a, b}));
  EXPECT_EQ(SplitImportRoots("/"), std::vector<std::string>{"/"});
  EXPECT_EQ(ImportRootOf(roots, b + "/img/file"), b);
  EXPECT_EQ(ImportRootOf(roots, dir_ + "/bx"), "");
  EXPECT_EQ(ImportRootOf("/:" + b, b + "/img"), b);  // the longest root it is below
  EXPECT_TRUE(OpenImportSource(roots, b + "/img/file").ok());
  EXPECT_TRUE(OpenImportSource(roots, a).ok());
  EXPECT_FALSE(OpenImportSource(roots, a + "/to-b/file").ok());
  // The positive control: the link does lead to the file when the host resolves it.
  EXPECT_TRUE(OpenImportSource("/", a + "/to-b/file").ok());
  auto outside = OpenImportSource(roots, dir_ + "/c");
  EXPECT_EQ(outside.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(outside.status().message().find("trusted template sources"), std::string::npos);
}

}  // namespace
}  // namespace space::storage
