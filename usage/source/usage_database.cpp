// The usage database's schema and statements (usage_database.h). A file is a
// usage database of this schema when its SQLite application_id and
// user_version say so; a new, empty file becomes one.
#include "gpulimit/usage/usage_database.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <utility>

namespace gpulimit::usage {

namespace {

constexpr int kApplicationId = 0x67706c75;  // "gplu"
constexpr int kSchemaVersion = 1;
constexpr int kBusyTimeoutMs = 5000;

constexpr const char* kSchema = R"sql(
CREATE TABLE tenants(
  run INTEGER NOT NULL,
  number INTEGER NOT NULL,
  tenant TEXT NOT NULL,
  uid INTEGER NOT NULL,
  user TEXT NOT NULL,
  groups TEXT NOT NULL,
  command TEXT NOT NULL,
  started_ns INTEGER NOT NULL,
  updated_ns INTEGER NOT NULL,
  ended_ns INTEGER,
  ended TEXT NOT NULL,
  PRIMARY KEY (run, number));
CREATE INDEX tenants_by_end ON tenants(ended_ns);
CREATE TABLE devices(
  run INTEGER NOT NULL,
  number INTEGER NOT NULL,
  uuid TEXT NOT NULL,
  held_ns INTEGER NOT NULL,
  peak_bytes INTEGER NOT NULL,
  byte_seconds REAL NOT NULL,
  oom_denials INTEGER NOT NULL,
  PRIMARY KEY (run, number, uuid));
)sql";

// A prepared statement, finalized when it goes.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql) { sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr); }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  explicit operator bool() const { return stmt_ != nullptr; }
  sqlite3_stmt* get() const { return stmt_; }

  void bind(int i, int64_t value) { sqlite3_bind_int64(stmt_, i, value); }
  void bind(int i, double value) { sqlite3_bind_double(stmt_, i, value); }
  void bind(int i, const std::string& value) {
    sqlite3_bind_text(stmt_, i, value.data(), static_cast<int>(value.size()), SQLITE_TRANSIENT);
  }
  void bind_null(int i) { sqlite3_bind_null(stmt_, i); }
  // Runs a statement that returns no rows, ready to be bound again.
  bool run() {
    const int rc = sqlite3_step(stmt_);
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
    return rc == SQLITE_DONE;
  }
  bool row() { return (last_ = sqlite3_step(stmt_)) == SQLITE_ROW; }
  // The rows ran out without an error.
  bool done() const { return last_ == SQLITE_DONE; }
  int64_t integer(int column) const { return sqlite3_column_int64(stmt_, column); }
  double real(int column) const { return sqlite3_column_double(stmt_, column); }
  bool null(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }
  std::string text(int column) const {
    const auto* text = sqlite3_column_text(stmt_, column);
    return text ? std::string(reinterpret_cast<const char*>(text),
                              static_cast<size_t>(sqlite3_column_bytes(stmt_, column)))
                : std::string();
  }

 private:
  sqlite3_stmt* stmt_ = nullptr;
  int last_ = SQLITE_OK;
};

bool execute(sqlite3* db, const char* sql) {
  return sqlite3_exec(db, sql, nullptr, nullptr, nullptr) == SQLITE_OK;
}

int pragma(sqlite3* db, const char* name, bool* ok) {
  Statement statement(db, (std::string("PRAGMA ") + name).c_str());
  *ok = statement && statement.row();
  return *ok ? static_cast<int>(statement.integer(0)) : 0;
}

std::string join(const std::vector<std::string>& parts) {
  std::string text;
  for (const std::string& part : parts)
    text += (text.empty() ? "" : ",") + part;
  return text;
}

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start < text.size()) {
    const size_t comma = text.find(',', start);
    const size_t end = comma == std::string::npos ? text.size() : comma;
    parts.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

// Rolls a transaction back unless it was committed.
class Transaction {
 public:
  explicit Transaction(sqlite3* db) : db_(db), begun_(execute(db, "BEGIN IMMEDIATE")) {}
  ~Transaction() {
    if (begun_ && !committed_) execute(db_, "ROLLBACK");
  }
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  bool begun() const { return begun_; }
  bool commit() { return committed_ = execute(db_, "COMMIT"); }

 private:
  sqlite3* db_;
  bool begun_;
  bool committed_ = false;
};

}  // namespace

std::unique_ptr<UsageDatabase> UsageDatabase::open_for_writing(const std::string& path,
                                                               std::string& error) {
  // Created here, not by SQLite, so that its mode does not follow the umask.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd >= 0) {
    ::fchmod(fd, 0644);
    ::close(fd);
  } else if (errno != EEXIST) {
    error = "usage database " + path + ": " + std::strerror(errno);
    return nullptr;
  }
  return open(path, true, error);
}

std::unique_ptr<UsageDatabase> UsageDatabase::open_for_reading(const std::string& path,
                                                               std::string& error) {
  return open(path, false, error);
}

std::unique_ptr<UsageDatabase> UsageDatabase::open(const std::string& path, bool write,
                                                   std::string& error) {
  sqlite3* db = nullptr;
  const int flags = (write ? SQLITE_OPEN_READWRITE : SQLITE_OPEN_READONLY) | SQLITE_OPEN_NOFOLLOW;
  if (sqlite3_open_v2(path.c_str(), &db, flags, nullptr) != SQLITE_OK) {
    error = "usage database " + path + ": " + (db ? sqlite3_errmsg(db) : "cannot be opened");
    sqlite3_close(db);
    return nullptr;
  }
  std::unique_ptr<UsageDatabase> database(new UsageDatabase(db, path));
  sqlite3_busy_timeout(db, kBusyTimeoutMs);
  if (!database->check_schema(write, error)) return nullptr;
  return database;
}

std::string UsageDatabase::failure(const char* what) const {
  return "usage database " + path_ + ": " + what + ": " + sqlite3_errmsg(db_);
}

bool UsageDatabase::check_schema(bool write, std::string& error) {
  bool ok = false;
  const int application = pragma(db_, "application_id", &ok);
  if (!ok) {
    error = failure("cannot be read");
    return false;
  }
  const int version = ok ? pragma(db_, "user_version", &ok) : 0;
  const int tables = ok ? pragma(db_, "schema_version", &ok) : 0;  // 0: nothing ever created
  if (!ok) {
    error = failure("cannot be read");
    return false;
  }
  const bool empty = application == 0 && version == 0 && tables == 0;
  if (!empty && (application != kApplicationId || version != kSchemaVersion)) {
    error = "usage database " + path_ +
            (application == kApplicationId
                 ? ": schema version " + std::to_string(version) + ", this gpulimit reads " +
                       std::to_string(kSchemaVersion)
                 : std::string(": not a gpulimit usage database"));
    return false;
  }
  if (!write) {
    if (empty) {
      error = "usage database " + path_ + ": empty: no gpulimitd has written it";
      return false;
    }
    return true;
  }
  if (empty) {
    Transaction transaction(db_);
    const std::string identity = "PRAGMA application_id = " + std::to_string(kApplicationId) +
                                 "; PRAGMA user_version = " + std::to_string(kSchemaVersion) + ";";
    if (!transaction.begun() || !execute(db_, kSchema) || !execute(db_, identity.c_str()) ||
        !transaction.commit()) {
      error = failure("cannot be created");
      return false;
    }
  }
  // WAL: readers never block the writer, and a commit is one append.
  // FULL: a commit is on disk before it returns.
  bool wal = false;
  {
    Statement journal(db_, "PRAGMA journal_mode = WAL");
    wal = journal && journal.row() && journal.text(0) == "wal";
  }
  if (!wal || !execute(db_, "PRAGMA synchronous = FULL")) {
    error = failure("cannot be put in WAL mode");
    return false;
  }
  return true;
}

UsageDatabase::~UsageDatabase() {
  sqlite3_close(db_);
}

bool UsageDatabase::save(const std::vector<TenantUsage>& records, std::string& error) {
  Transaction transaction(db_);
  Statement tenant(db_,
                   "INSERT OR REPLACE INTO tenants(run, number, tenant, uid, user, groups, "
                   "command, started_ns, updated_ns, ended_ns, ended) "
                   "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)");
  Statement device(db_,
                   "INSERT OR REPLACE INTO devices(run, number, uuid, held_ns, peak_bytes, "
                   "byte_seconds, oom_denials) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
  if (!transaction.begun() || !tenant || !device) {
    error = failure("cannot be written");
    return false;
  }
  for (const TenantUsage& record : records) {
    tenant.bind(1, record.run);
    tenant.bind(2, static_cast<int64_t>(record.number));
    tenant.bind(3, record.tenant);
    tenant.bind(4, static_cast<int64_t>(record.uid));
    tenant.bind(5, record.user);
    tenant.bind(6, join(record.groups));
    tenant.bind(7, record.command);
    tenant.bind(8, record.started_ns);
    tenant.bind(9, record.updated_ns);
    if (record.ended_ns)
      tenant.bind(10, *record.ended_ns);
    else
      tenant.bind_null(10);
    tenant.bind(11, record.ended);
    if (!tenant.run()) {
      error = failure("cannot be written");
      return false;
    }
    for (const DeviceUsage& used : record.devices) {
      device.bind(1, record.run);
      device.bind(2, static_cast<int64_t>(record.number));
      device.bind(3, used.uuid);
      device.bind(4, static_cast<int64_t>(used.held_ns));
      device.bind(5, static_cast<int64_t>(used.peak_bytes));
      device.bind(6, used.byte_seconds);
      device.bind(7, static_cast<int64_t>(used.oom_denials));
      if (!device.run()) {
        error = failure("cannot be written");
        return false;
      }
    }
  }
  if (!transaction.commit()) {
    error = failure("cannot be committed");
    return false;
  }
  return true;
}

int UsageDatabase::close_unfinished(int64_t run, std::string& error) {
  Statement close(db_,
                  "UPDATE tenants SET ended_ns = updated_ns, ended = ?1 "
                  "WHERE ended_ns IS NULL AND run < ?2");
  if (!close) {
    error = failure("cannot be written");
    return -1;
  }
  close.bind(1, std::string(kEndedLost));
  close.bind(2, run);
  if (!close.run()) {
    error = failure("cannot be written");
    return -1;
  }
  return sqlite3_changes(db_);
}

bool UsageDatabase::load(int64_t since_ns, std::vector<TenantUsage>& records, std::string& error) {
  // One read transaction: the writer's commits meanwhile are not half seen.
  if (!execute(db_, "BEGIN")) {
    error = failure("cannot be read");
    return false;
  }
  Statement tenants(db_,
                    "SELECT run, number, tenant, uid, user, groups, command, started_ns, "
                    "updated_ns, ended_ns, ended FROM tenants "
                    "WHERE ended_ns IS NULL OR ended_ns >= ?1 ORDER BY started_ns, run, number");
  Statement devices(db_,
                    "SELECT d.run, d.number, d.uuid, d.held_ns, d.peak_bytes, d.byte_seconds, "
                    "d.oom_denials FROM devices d JOIN tenants t USING (run, number) "
                    "WHERE t.ended_ns IS NULL OR t.ended_ns >= ?1 ORDER BY d.uuid");
  bool ok = tenants && devices;
  std::map<std::pair<int64_t, int64_t>, size_t> index;
  if (ok) {
    tenants.bind(1, since_ns);
    while (tenants.row()) {
      TenantUsage record;
      record.run = tenants.integer(0);
      record.number = static_cast<uint32_t>(tenants.integer(1));
      record.tenant = tenants.text(2);
      record.uid = static_cast<uint32_t>(tenants.integer(3));
      record.user = tenants.text(4);
      record.groups = split(tenants.text(5));
      record.command = tenants.text(6);
      record.started_ns = tenants.integer(7);
      record.updated_ns = tenants.integer(8);
      if (!tenants.null(9)) record.ended_ns = tenants.integer(9);
      record.ended = tenants.text(10);
      index[{record.run, record.number}] = records.size();
      records.push_back(std::move(record));
    }
    devices.bind(1, since_ns);
    while (devices.row()) {
      auto it = index.find({devices.integer(0), devices.integer(1)});
      if (it == index.end()) continue;
      DeviceUsage used;
      used.uuid = devices.text(2);
      used.held_ns = static_cast<uint64_t>(devices.integer(3));
      used.peak_bytes = static_cast<uint64_t>(devices.integer(4));
      used.byte_seconds = devices.real(5);
      used.oom_denials = static_cast<uint64_t>(devices.integer(6));
      records[it->second].devices.push_back(std::move(used));
    }
    ok = tenants.done() && devices.done();
  }
  execute(db_, "COMMIT");
  if (!ok) {
    error = failure("cannot be read");
    return false;
  }
  return true;
}

}  // namespace gpulimit::usage
