// The usage database: an SQLite file gpulimitd writes and `gpulimit usage`
// reads. Written in WAL mode with full synchronisation, every save one
// transaction: a crash or SIGKILL of the writer at any instant loses nothing
// committed and leaves the file whole; readers never block the writer.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gpulimit/usage/usage_records.h"

struct sqlite3;

namespace gpulimit::usage {

class UsageDatabase {
 public:
  // Opens (creating if missing, with mode 0644: what `gpulimit status`
  // shows anyone already) the database for writing. Null, with a one-line
  // `error` naming the file, when it cannot be opened or is not a usage
  // database of this schema; the file is then left as it was.
  static std::unique_ptr<UsageDatabase> open_for_writing(const std::string& path,
                                                         std::string& error);
  // Opens an existing database read-only.
  static std::unique_ptr<UsageDatabase> open_for_reading(const std::string& path,
                                                         std::string& error);
  ~UsageDatabase();
  UsageDatabase(const UsageDatabase&) = delete;
  UsageDatabase& operator=(const UsageDatabase&) = delete;

  // Writes `records` (new ones inserted, known ones replaced with their
  // devices), all or none.
  bool save(const std::vector<TenantUsage>& records, std::string& error);
  // Closes every record still open from an earlier run than `run`: ended
  // kEndedLost at its last update. Returns how many, or -1 on error.
  int close_unfinished(int64_t run, std::string& error);
  // The records of tenants that ran at or after `since_ns` (still running,
  // or ended then or later), oldest first. False on error.
  bool load(int64_t since_ns, std::vector<TenantUsage>& records, std::string& error);

  const std::string& path() const { return path_; }

 private:
  UsageDatabase(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  static std::unique_ptr<UsageDatabase> open(const std::string& path, bool write,
                                             std::string& error);
  bool check_schema(bool write, std::string& error);
  std::string failure(const char* what) const;

  sqlite3* db_;
  std::string path_;
};

}  // namespace gpulimit::usage
