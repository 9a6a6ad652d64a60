// PgConnection: one libpq connection to PostgreSQL and the statements prepared on it.
//
// Values only ever travel as bound parameters: Run() prepares a named, constant statement on
// first use on this connection and executes it with PQexecPrepared. The only text sent as a
// whole is constant, parameterless SQL (BEGIN, COMMIT, migration DDL) through ExecScript().
//
// A connection is used by one thread at a time (PgPool hands it out); it is not thread-safe.
#pragma once

#include <libpq-fe.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_set>
#include <variant>
#include <vector>

#include "common/result.h"

namespace space::store::pg {

// A bound parameter: SQL NULL, an integer, or text.
using Param = std::variant<std::nullptr_t, int64_t, std::string>;

// A statement the store runs. `name` is the key it is prepared under on every connection, so
// two statements never share a name. Both point at string literals.
struct Statement {
  const char* name;
  const char* sql;
};

// The rows of one statement, in libpq's text format. Owns the PGresult.
class PgRows {
 public:
  explicit PgRows(PGresult* res) : res_(res, &PQclear) {}

  int size() const { return PQntuples(res_.get()); }
  bool IsNull(int row, int col) const { return PQgetisnull(res_.get(), row, col) != 0; }
  std::string Text(int row, int col) const {
    return std::string(PQgetvalue(res_.get(), row, col), static_cast<size_t>(PQgetlength(res_.get(), row, col)));
  }
  // BIGINT/INTEGER columns; a NULL or unparsable value reads as 0 (columns are NOT NULL).
  int64_t Int(int row, int col) const;
  // Rows an INSERT/UPDATE/DELETE touched.
  int64_t affected() const;

 private:
  std::unique_ptr<PGresult, void (*)(PGresult*)> res_;
};

class PgConnection {
 public:
  // Connects to `url` (a libpq URI or key=value string). `op` names the caller in errors.
  static Result<std::unique_ptr<PgConnection>> Connect(const std::string& url, std::string_view op);

  ~PgConnection() { PQfinish(conn_); }
  PgConnection(const PgConnection&) = delete;
  PgConnection& operator=(const PgConnection&) = delete;

  // Runs constant SQL that has no values in it, possibly several statements.
  Status ExecScript(std::string_view sql, std::string_view op);
  // Runs `stmt` with `params` bound as $1..$n, preparing it on this connection first if needed.
  Result<PgRows> Run(const Statement& stmt, const std::vector<Param>& params, std::string_view op);

  // The socket is gone (server restart, network): the connection must not be reused.
  bool broken() const { return PQstatus(conn_) != CONNECTION_OK; }
  // A transaction is open or aborted: handing this connection to someone else would leak it.
  bool in_transaction() const { return PQtransactionStatus(conn_) != PQTRANS_IDLE; }

 private:
  explicit PgConnection(PGconn* conn) : conn_(conn) {}
  // Turns a failed result (or a missing one) into a Status naming `op`; takes ownership of `res`.
  Status ResultError(PGresult* res, std::string_view op);

  PGconn* conn_;
  std::unordered_set<std::string> prepared_;  // statement names prepared on conn_
};

// `url` with any password replaced by "***", for messages and logs.
std::string RedactUrl(std::string_view url);

}  // namespace space::store::pg
