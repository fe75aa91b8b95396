// SPDX-License-Identifier: Apache-2.0
#pragma once
// Helpers for the reliability tests: a tracer running in the background (so a
// test can signal it mid-run), file hashes, and the BPF objects a process owns.
#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "e2e_util.h"

namespace causeway::e2e {

// `causeway trace ARGS` in the background, stdout+stderr into a log file.
class BackgroundTrace {
 public:
  BackgroundTrace(const std::vector<std::string>& args, const std::string& log) : log_(log) {
    pid_ = fork();
    if (pid_ == 0) {
      int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, 1);
      dup2(fd, 2);
      std::vector<char*> argv{const_cast<char*>(kBin.c_str()), const_cast<char*>("trace")};
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(kBin.c_str(), argv.data());
      _exit(127);
    }
  }
  ~BackgroundTrace() {
    if (pid_ > 0 && status_ < 0) {
      kill(pid_, SIGKILL);
      wait();
    }
  }
  pid_t pid() const { return pid_; }
  std::string log() const {
    std::ifstream f(log_);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
  }
  // Waits (bounded) until the log holds `text`; false if the tracer exited first.
  bool wait_for_log(const std::string& text, int seconds = 60) {
    for (int i = 0; i < seconds * 20; i++) {
      if (log().find(text) != std::string::npos) return true;
      if (waitpid(pid_, &status_, WNOHANG) == pid_) return log().find(text) != std::string::npos;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }
  // Exit code, or 128+signal.
  int wait() {
    if (status_ < 0) waitpid(pid_, &status_, 0);
    return WIFEXITED(status_) ? WEXITSTATUS(status_) : 128 + WTERMSIG(status_);
  }

 private:
  std::string log_;
  pid_t pid_ = -1;
  int status_ = -1;
};

inline std::string sha256(const std::string& path) {
  auto r = run("sha256sum " + path);
  return r.out.substr(0, 64);
}

inline std::string integrity_check(const std::string& path) {
  sqlite3* db = nullptr;
  std::string out;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    out = std::string("open failed: ") + sqlite3_errmsg(db);
  } else {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, nullptr) == SQLITE_OK) {
      while (sqlite3_step(st) == SQLITE_ROW) out += reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    } else {
      out = std::string("prepare failed: ") + sqlite3_errmsg(db);
    }
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return out;
}

// Ids of the BPF programs ("prog") or links ("link") a process holds, from
// its fds' /proc fdinfo (bpftool here cannot name owners: no pid iterator).
inline std::set<int64_t> bpf_ids_owned_by(const std::string& kind, pid_t pid) {
  std::set<int64_t> ids;
  const std::string type_key = kind + "_type:", id_key = kind + "_id:";
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fdinfo", ec)) {
    std::ifstream f(e.path());
    std::string line, id;
    bool is_kind = false;
    while (std::getline(f, line)) {
      if (line.rfind(type_key, 0) == 0) is_kind = true;
      if (line.rfind(id_key, 0) == 0) id = line.substr(id_key.size());
    }
    if (is_kind && !id.empty()) ids.insert(std::stoll(id));
  }
  return ids;
}

inline bool bpf_object_exists(const std::string& kind, int64_t id) {
  // The kernel frees a dead process's programs and links after an RCU grace
  // period (deferred work): allow it up to 10 s before calling one leaked.
  for (int i = 0; i < 100; i++) {
    if (run("bpftool " + kind + " show id " + std::to_string(id)).exit_code != 0) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return true;
}

inline std::vector<std::string> non_empty_lines(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(line);
  return out;
}

}  // namespace causeway::e2e
