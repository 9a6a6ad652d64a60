// What only the PostgreSQL store has: concurrent migration by several servers, refusal of a
// newer schema, reconnecting after its connections die, and errors that name the operation
// without leaking a password. The Store contract itself is in store_test.cc.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "store/pg_connection.h"
#include "store/pg_test_db.h"
#include "store/postgres_migrations.h"
#include "store/postgres_store.h"

namespace space::store {
namespace {

class PostgresStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!PgTestDb::Configured(&why)) {
      if (PgTestDb::Required()) FAIL() << why;
      GTEST_SKIP() << why;
    }
    Status st = db_.Create();
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  // A connection outside any store, for inspecting and sabotaging the database.
  std::unique_ptr<pg::PgConnection> Admin() {
    auto conn = pg::PgConnection::Connect(db_.url(), "test admin");
    EXPECT_TRUE(conn.ok()) << conn.status().ToString();
    return conn.ok() ? std::move(conn).value() : nullptr;
  }
  PgTestDb db_;
};

TEST_F(PostgresStoreTest, ServersStartingTogetherMigrateOnce) {
  constexpr int kServers = 6;
  std::vector<Status> results(kServers);
  std::vector<std::thread> threads;
  for (int i = 0; i < kServers; ++i) {
    threads.emplace_back([&, i] { results[i] = OpenPostgresStore(db_.url()).status(); });
  }
  for (auto& t : threads) t.join();
  for (const Status& st : results) EXPECT_TRUE(st.ok()) << st.ToString();
  auto admin = Admin();
  ASSERT_NE(admin, nullptr);
  auto rows = admin->Run({"t_versions", "SELECT count(*), min(version), max(version) FROM schema_migrations"}, {},
                         "test");
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  const int64_t kVersions = static_cast<int64_t>(std::size(kPostgresMigrations));
  EXPECT_EQ(rows->Int(0, 0), kVersions);
  EXPECT_EQ(rows->Int(0, 1), 1);
  EXPECT_EQ(rows->Int(0, 2), kVersions);
}

TEST_F(PostgresStoreTest, RefusesSchemaFromANewerBinary) {
  ASSERT_TRUE(OpenPostgresStore(db_.url()).ok());
  auto admin = Admin();
  ASSERT_NE(admin, nullptr);
  ASSERT_TRUE(admin->ExecScript("INSERT INTO schema_migrations VALUES (99, 0)", "test").ok());
  auto s = OpenPostgresStore(db_.url());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInternal);
  EXPECT_NE(s.status().message().find("newer than this binary"), std::string::npos) << s.status().message();
}

TEST_F(PostgresStoreTest, FailedMigrationLeavesNothingBehind) {
  // A table in the way of migration 1 makes it fail; the transaction must take everything
  // with it, including schema_migrations, so a fixed database migrates cleanly later.
  auto admin = Admin();
  ASSERT_NE(admin, nullptr);
  ASSERT_TRUE(admin->ExecScript("CREATE TABLE audit (x INTEGER)", "test").ok());
  auto s = OpenPostgresStore(db_.url());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("migration 1"), std::string::npos) << s.status().message();
  auto rows = admin->Run({"t_tables", "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()"}, {},
                         "test");
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  EXPECT_EQ(rows->Int(0, 0), 1);  // only the obstacle
  ASSERT_TRUE(admin->ExecScript("DROP TABLE audit", "test").ok());
  EXPECT_TRUE(OpenPostgresStore(db_.url()).ok());
}

TEST_F(PostgresStoreTest, ReconnectsAfterItsConnectionsAreKilled) {
  auto s = OpenPostgresStore(db_.url());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto& store = *s;
  const std::string digest(64, 'c');
  ASSERT_TRUE(store->PutApiKey(digest, "t", "admin").ok());
  // What a database restart or failover does to every pooled connection.
  auto admin = pg::PgConnection::Connect(PgTestDb::BaseUrl(), "test admin");
  ASSERT_TRUE(admin.ok());
  auto killed = (*admin)->Run({"t_kill",
                               "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                               "WHERE application_name = $1 AND pid <> pg_backend_pid()"},
                              {db_.schema()}, "test");
  ASSERT_TRUE(killed.ok()) << killed.status().ToString();
  ASSERT_GE(killed->Int(0, 0), 1);
  auto team = store->TeamForApiKey(digest);
  ASSERT_TRUE(team.ok()) << team.status().ToString();
  EXPECT_EQ(*team, "t");
}

TEST(PostgresStoreErrors, UnreachableServerIsUnavailableAndHidesPassword) {
  auto s = OpenPostgresStore("postgresql://space:hunter2@/space?host=/nonexistent-dir&connect_timeout=2");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kUnavailable);
  const std::string& m = s.status().message();
  EXPECT_NE(m.find("open"), std::string::npos) << m;
  EXPECT_NE(m.find("connect"), std::string::npos) << m;
  EXPECT_EQ(m.find("hunter2"), std::string::npos) << m;
}

TEST(PostgresStoreErrors, RedactUrl) {
  struct Case {
    const char* in;
    const char* want;
  };
  const Case cases[] = {
      {"postgres://u:pw@h:5432/db", "postgres://u:***@h:5432/db"},
      {"postgresql://u@h/db", "postgresql://u@h/db"},
      {"postgresql:///db?host=/run/pg", "postgresql:///db?host=/run/pg"},
      {"postgresql://h/db?user=u&password=pw&sslmode=require", "postgresql://h/db?user=u&password=***&sslmode=require"},
      {"host=h password=pw dbname=d", "host=h password=*** dbname=d"},
  };
  for (const Case& c : cases) EXPECT_EQ(pg::RedactUrl(c.in), c.want) << c.in;
}

}  // namespace
}  // namespace space::store
