#include "guest/dir_watch.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <utility>
#include <vector>

#include "guest/files.h"
#include "protocol/protocol.h"

namespace space::guest {
namespace {

using Events = std::vector<std::pair<std::string, std::string>>;  // (name, type)

class DirWatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/dir_watch_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { (void)DeletePath(dir_, true); }

  void Touch(const std::string& rel) {
    int fd = ::open((dir_ + "/" + rel).c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0) << rel;
    ::close(fd);
  }
  void Mkdir(const std::string& rel) { ASSERT_EQ(::mkdir((dir_ + "/" + rel).c_str(), 0755), 0) << rel; }

  // Reads until the inotify fd stays quiet for 100 ms; returns every event and whether an
  // overflow was reported.
  static std::pair<Events, bool> Drain(DirWatch& w) {
    Events out;
    bool overflow = false;
    pollfd p{w.fd(), POLLIN, 0};
    while (::poll(&p, 1, 100) > 0) {
      w.ReadEvents();
      while (w.has_pending()) {
        nlohmann::json batch = w.TakeBatch();
        EXPECT_LE(batch["events"].size(), kMaxWatchBatch);
        overflow = overflow || batch["overflow"].get<bool>();
        for (const auto& e : batch["events"]) out.emplace_back(e["name"], e["type"]);
      }
    }
    return {out, overflow};
  }
  static bool Has(const Events& ev, const std::string& name, const std::string& type) {
    for (const auto& [n, t] : ev) {
      if (n == name && t == type) return true;
    }
    return false;
  }

  std::string dir_;
  WatchBudget budget_{0, 64};
};

TEST_F(DirWatchTest, ReportsEachKindOfChange) {
  auto w = DirWatch::Create(dir_, false, &budget_);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  Touch("a");
  int fd = ::open((dir_ + "/a").c_str(), O_WRONLY | O_CLOEXEC);
  ASSERT_EQ(::write(fd, "x", 1), 1);
  ::close(fd);
  ASSERT_EQ(::chmod((dir_ + "/a").c_str(), 0600), 0);
  ASSERT_EQ(::rename((dir_ + "/a").c_str(), (dir_ + "/b").c_str()), 0);
  ASSERT_EQ(::unlink((dir_ + "/b").c_str()), 0);
  auto [ev, overflow] = Drain(**w);
  // Created and removed at once is still both events: no polling window to fall into.
  EXPECT_EQ(ev, (Events{{"a", "create"}, {"a", "write"}, {"a", "chmod"}, {"a", "rename"}, {"b", "create"},
                        {"b", "remove"}}));
  EXPECT_FALSE(overflow);
}

TEST_F(DirWatchTest, NonRecursiveIgnoresSubdirectories) {
  Mkdir("sub");
  auto w = DirWatch::Create(dir_, false, &budget_);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ((*w)->watched_dirs(), 1u);
  Touch("sub/inner");
  EXPECT_TRUE(Drain(**w).first.empty());
}

TEST_F(DirWatchTest, RecursiveFollowsNewDirectories) {
  Mkdir("old");
  Mkdir("old/deep");
  auto w = DirWatch::Create(dir_ + "/", true, &budget_);  // a trailing slash is fine
  ASSERT_TRUE(w.ok());
  EXPECT_EQ((*w)->watched_dirs(), 3u);
  EXPECT_EQ(budget_.used, 3u);
  Touch("old/deep/f");
  Mkdir("new");
  auto [ev1, o1] = Drain(**w);  // the watch on "new" is added while handling its create
  EXPECT_TRUE(Has(ev1, "old/deep/f", "create"));
  EXPECT_TRUE(Has(ev1, "new", "create"));
  Touch("new/g");
  ASSERT_EQ(::rename((dir_ + "/old").c_str(), (dir_ + "/moved").c_str()), 0);
  auto [ev2, o2] = Drain(**w);
  EXPECT_TRUE(Has(ev2, "new/g", "create"));
  EXPECT_TRUE(Has(ev2, "old", "rename"));
  EXPECT_TRUE(Has(ev2, "moved", "create"));
  // The moved tree is watched under its new name only.
  Touch("moved/deep/h");
  auto [ev3, o3] = Drain(**w);
  EXPECT_EQ(ev3, (Events{{"moved/deep/h", "create"}}));
  EXPECT_FALSE(o1 || o2 || o3);
  w->reset();
  EXPECT_EQ(budget_.used, 0u);  // the budget comes back with the watch
}

TEST_F(DirWatchTest, BudgetBoundsWatchedDirectories) {
  Mkdir("a");
  Mkdir("b");
  WatchBudget small{0, 2};
  auto refused = DirWatch::Create(dir_, true, &small);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(small.used, 0u);

  ASSERT_EQ(::rmdir((dir_ + "/b").c_str()), 0);
  auto w = DirWatch::Create(dir_, true, &small);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(small.used, 2u);
  // A directory past the cap is reported, and flagged as lost coverage.
  Mkdir("c");
  auto [ev, overflow] = Drain(**w);
  EXPECT_TRUE(Has(ev, "c", "create"));
  EXPECT_TRUE(overflow);
  EXPECT_EQ(small.used, 2u);
}

TEST_F(DirWatchTest, QueueIsCappedWithOverflow) {
  auto w = DirWatch::Create(dir_, false, &budget_);
  ASSERT_TRUE(w.ok());
  for (size_t i = 0; i < kMaxWatchQueue + 100; ++i) Touch("f" + std::to_string(i));
  // Read everything before taking any batch: the queue fills past its cap.
  pollfd p{(*w)->fd(), POLLIN, 0};
  while (::poll(&p, 1, 100) > 0) (*w)->ReadEvents();
  size_t total = 0;
  bool overflow = false;
  while ((*w)->has_pending()) {
    nlohmann::json batch = (*w)->TakeBatch();
    total += batch["events"].size();
    overflow = overflow || batch["overflow"].get<bool>();
  }
  EXPECT_EQ(total, kMaxWatchQueue);
  EXPECT_TRUE(overflow);
  EXPECT_TRUE((*w)->TakeBatch().empty());
}

TEST_F(DirWatchTest, RemovingTheRootEndsTheWatch) {
  Mkdir("root");
  auto w = DirWatch::Create(dir_ + "/root", true, &budget_);
  ASSERT_TRUE(w.ok());
  ASSERT_EQ(::rmdir((dir_ + "/root").c_str()), 0);
  Drain(**w);
  EXPECT_TRUE((*w)->root_gone());
  EXPECT_EQ(budget_.used, 0u);
}

TEST_F(DirWatchTest, RefusesWhatIsNotADirectory) {
  Touch("file");
  struct Case {
    std::string path;
    StatusCode code;
  };
  const Case cases[] = {
      {dir_ + "/missing", StatusCode::kNotFound},
      {dir_ + "/file", StatusCode::kInvalidArgument},
      {"relative", StatusCode::kInvalidArgument},
      {"", StatusCode::kInvalidArgument},
      {"/" + std::string(5000, 'a'), StatusCode::kInvalidArgument},
  };
  for (const Case& c : cases) {
    auto w = DirWatch::Create(c.path, true, &budget_);
    ASSERT_FALSE(w.ok()) << c.path;
    EXPECT_EQ(w.status().code(), c.code) << c.path << ": " << w.status().ToString();
  }
  EXPECT_EQ(budget_.used, 0u);
}

}  // namespace
}  // namespace space::guest
