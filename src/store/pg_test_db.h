// Test helper: a private, empty PostgreSQL schema for one test, in the database that
// SPACE_TEST_PG_URL names (`make test` starts a throwaway cluster and sets it; see
// scripts/pg-test-cluster.sh). The URL it hands out sets search_path to the schema, so a store
// opened on it sees only its own tables, and tests running in parallel never meet.
//
// Without SPACE_TEST_PG_URL, Available() says why: tests then skip, unless
// SPACE_TEST_PG_REQUIRED=1 (set by `make test`) makes a missing database a failure.
#pragma once

#include <string>

#include "common/status.h"

namespace space::store {

class PgTestDb {
 public:
  PgTestDb() = default;
  ~PgTestDb();  // drops the schema
  PgTestDb(const PgTestDb&) = delete;
  PgTestDb& operator=(const PgTestDb&) = delete;

  // Whether SPACE_TEST_PG_URL is set; `why` gets the message to skip or fail with.
  static bool Configured(std::string* why);
  // Whether the tests must fail rather than skip when PostgreSQL is missing.
  static bool Required();

  // Creates the schema. The connection's application_name is the schema name too, so a test
  // can find (and kill) exactly its own backends.
  Status Create();
  const std::string& url() const { return url_; }
  const std::string& schema() const { return schema_; }
  // The database's URL without the schema's search_path, for administrative statements.
  static std::string BaseUrl();

 private:
  std::string schema_;
  std::string url_;
};

}  // namespace space::store
