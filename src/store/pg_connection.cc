#include "store/pg_connection.h"

#include <charconv>

namespace space::store::pg {
namespace {

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// SQLSTATE classes the caller can do something about map to their own codes; everything else
// is a bug or a broken database and stays internal.
StatusCode CodeForSqlState(std::string_view state) {
  if (state.substr(0, 2) == "08") return StatusCode::kUnavailable;  // connection exception
  if (state.substr(0, 2) == "53") return StatusCode::kUnavailable;  // too many connections, disk full
  if (state.substr(0, 3) == "57P") return StatusCode::kUnavailable;  // server shutting down
  if (state == "40001" || state == "40P01") return StatusCode::kUnavailable;  // retry the transaction
  if (state == "23505") return StatusCode::kConflict;  // unique violation
  return StatusCode::kInternal;
}

}  // namespace

int64_t PgRows::Int(int row, int col) const {
  const char* p = PQgetvalue(res_.get(), row, col);
  int64_t v = 0;
  std::from_chars(p, p + PQgetlength(res_.get(), row, col), v);
  return v;
}

int64_t PgRows::affected() const {
  const char* p = PQcmdTuples(res_.get());
  int64_t v = 0;
  std::from_chars(p, p + std::char_traits<char>::length(p), v);
  return v;
}

Result<std::unique_ptr<PgConnection>> PgConnection::Connect(const std::string& url, std::string_view op) {
  // Keywords after the expanded URL would override it, so defaults come first: the URL may set
  // its own connect_timeout. Without one, an unreachable host blocks a store call forever.
  const char* keys[] = {"connect_timeout", "application_name", "dbname", nullptr};
  const char* values[] = {"10", "space", url.c_str(), nullptr};
  PGconn* conn = PQconnectdbParams(keys, values, /*expand_dbname=*/1);
  if (conn == nullptr) return Unavailable("postgres " + std::string(op) + ": connect: out of memory");
  if (PQstatus(conn) != CONNECTION_OK) {
    std::string msg = Trim(PQerrorMessage(conn));
    PQfinish(conn);
    return Unavailable("postgres " + std::string(op) + ": connect to " + RedactUrl(url) + ": " + msg);
  }
  // NOTICEs ("relation already exists, skipping") would otherwise go to stderr unasked.
  PQsetNoticeProcessor(conn, [](void*, const char*) {}, nullptr);
  return std::unique_ptr<PgConnection>(new PgConnection(conn));
}

Status PgConnection::ResultError(PGresult* res, std::string_view op) {
  StatusCode code = StatusCode::kUnavailable;  // no result at all: the connection failed
  std::string msg;
  if (res != nullptr) {
    const char* state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
    const char* primary = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
    if (state != nullptr) {
      code = CodeForSqlState(state);
      msg = std::string(primary ? primary : "error") + " (SQLSTATE " + state + ")";
    }
    PQclear(res);
  }
  if (broken()) code = StatusCode::kUnavailable;
  if (msg.empty()) msg = Trim(PQerrorMessage(conn_));
  return Status(code, "postgres " + std::string(op) + ": " + msg);
}

Status PgConnection::ExecScript(std::string_view sql, std::string_view op) {
  PGresult* res = PQexec(conn_, std::string(sql).c_str());
  ExecStatusType st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) return ResultError(res, op);
  PQclear(res);
  return Status::Ok();
}

Result<PgRows> PgConnection::Run(const Statement& stmt, const std::vector<Param>& params, std::string_view op) {
  if (!prepared_.contains(stmt.name)) {
    // Parameter types are left to the server to infer from where each $n is used.
    PGresult* res = PQprepare(conn_, stmt.name, stmt.sql, 0, nullptr);
    if (res == nullptr || PQresultStatus(res) != PGRES_COMMAND_OK) return ResultError(res, op);
    PQclear(res);
    prepared_.insert(stmt.name);
  }
  // Text format for every value: the strings below outlive the call, the pointers into them
  // are what libpq reads.
  std::vector<std::string> text(params.size());
  std::vector<const char*> values(params.size(), nullptr);
  for (size_t i = 0; i < params.size(); ++i) {
    if (auto* n = std::get_if<int64_t>(&params[i])) {
      text[i] = std::to_string(*n);
      values[i] = text[i].c_str();
    } else if (auto* s = std::get_if<std::string>(&params[i])) {
      values[i] = s->c_str();
    }
  }
  PGresult* res = PQexecPrepared(conn_, stmt.name, static_cast<int>(values.size()), values.data(), nullptr,
                                 nullptr, /*resultFormat=*/0);
  ExecStatusType st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) return ResultError(res, op);
  return PgRows(res);
}

std::string RedactUrl(std::string_view url) {
  // scheme://user:password@host... -> scheme://user:***@host...
  size_t scheme = url.find("://");
  if (scheme != std::string_view::npos) {
    size_t start = scheme + 3;
    size_t at = url.find('@', start);
    size_t slash = url.find('/', start);
    if (at != std::string_view::npos && (slash == std::string_view::npos || at < slash)) {
      size_t colon = url.find(':', start);
      if (colon != std::string_view::npos && colon < at) {
        return std::string(url.substr(0, colon + 1)) + "***" + std::string(url.substr(at));
      }
    }
  }
  // password=... in a key=value string or a URI query.
  size_t pw = url.find("password=");
  if (pw != std::string_view::npos) {
    size_t end = url.find_first_of(" &", pw);
    return std::string(url.substr(0, pw)) + "password=***" +
           (end == std::string_view::npos ? std::string() : std::string(url.substr(end)));
  }
  return std::string(url);
}

}  // namespace space::store::pg
