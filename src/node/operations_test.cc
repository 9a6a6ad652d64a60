#include "node/operations.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>

namespace space::node {
namespace {

TEST(OperationsTest, RunsAndRecordsAndSerializesPerTarget) {
  char tmpl[] = "/tmp/ops_test.XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string dir = tmpl;
  auto store = store::OpenSqliteStore(dir + "/s.db");
  ASSERT_TRUE(store.ok());
  std::atomic<int> running_a{0}, max_a{0};
  {
    Operations ops(store->get(), 4);
    std::vector<std::string> ids;
    for (int i = 0; i < 6; ++i) {
      auto op = ops.Submit("t", "k", "sbx_a", [&] {
        int now = ++running_a;
        max_a = std::max(max_a.load(), now);
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        --running_a;
        return Status::Ok();
      });
      ASSERT_TRUE(op.ok());
      ids.push_back(op->id);
    }
    auto failing = ops.Submit("t", "k", "sbx_b", [] { return Internal("boom"); });
    ASSERT_TRUE(failing.ok());
    for (auto& id : ids) EXPECT_EQ(ops.Wait(id, 5000)->state, store::OperationState::kSucceeded);
    auto f = ops.Wait(failing->id, 5000);
    EXPECT_EQ(f->state, store::OperationState::kFailed);
    EXPECT_EQ(f->error, "boom");
  }
  EXPECT_EQ(max_a.load(), 1);
  ASSERT_EQ(std::system(("rm -rf " + dir).c_str()), 0);
}

}  // namespace
}  // namespace space::node
