#include "store/pg_test_db.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>

#include "store/pg_connection.h"

namespace space::store {

bool PgTestDb::Configured(std::string* why) {
  const char* url = std::getenv("SPACE_TEST_PG_URL");
  if (url != nullptr && *url != '\0') return true;
  *why = "SPACE_TEST_PG_URL is not set: run `make unit` (which starts a throwaway cluster), or "
         "scripts/pg-test-cluster.sh run -- ctest ...";
  return false;
}

bool PgTestDb::Required() {
  const char* v = std::getenv("SPACE_TEST_PG_REQUIRED");
  return v != nullptr && std::string(v) == "1";
}

std::string PgTestDb::BaseUrl() {
  const char* url = std::getenv("SPACE_TEST_PG_URL");
  return url ? url : "";
}

Status PgTestDb::Create() {
  static std::atomic<int> counter{0};
  schema_ = "space_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++);
  std::string base = BaseUrl();
  // URI query parameters: -c search_path=<schema>, percent-encoded.
  url_ = base + (base.find('?') == std::string::npos ? "?" : "&") + "options=-csearch_path%3D" + schema_ +
         "&application_name=" + schema_;
  auto conn = pg::PgConnection::Connect(base, "test setup");
  if (!conn.ok()) return conn.status();
  // An identifier cannot be a parameter; the name is ours, made of [a-z0-9_] only.
  return (*conn)->ExecScript("CREATE SCHEMA " + schema_, "test setup: create schema");
}

PgTestDb::~PgTestDb() {
  if (schema_.empty()) return;
  auto conn = pg::PgConnection::Connect(BaseUrl(), "test teardown");
  if (conn.ok()) (void)(*conn)->ExecScript("DROP SCHEMA IF EXISTS " + schema_ + " CASCADE", "test teardown");
}

}  // namespace space::store
