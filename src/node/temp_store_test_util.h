// TempStore: a SQLite store in a fresh temporary directory, for the node's unit tests; the
// directory goes with it.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "store/store.h"

namespace space::node {

class TempStore {
 public:
  TempStore() {
    char tmpl[] = "/tmp/node_test.XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) {
      ADD_FAILURE() << "mkdtemp failed";
      return;
    }
    dir_ = tmpl;
    auto store = store::OpenSqliteStore(dir_ + "/s.db");
    if (!store.ok()) {
      ADD_FAILURE() << store.status().ToString();
      return;
    }
    store_ = std::move(store).value();
  }
  ~TempStore() {
    store_.reset();
    if (!dir_.empty()) {
      EXPECT_EQ(std::system(("rm -rf " + dir_).c_str()), 0);
    }
  }
  TempStore(const TempStore&) = delete;
  TempStore& operator=(const TempStore&) = delete;

  store::Store* get() const { return store_.get(); }

 private:
  std::string dir_;
  std::unique_ptr<store::Store> store_;
};

}  // namespace space::node
