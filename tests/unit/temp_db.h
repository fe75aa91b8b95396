// SPDX-License-Identifier: Apache-2.0
#pragma once
// A trace path in a fresh temporary folder, removed with its -wal/-shm files.
#include <stdlib.h>

#include <filesystem>
#include <string>

struct TempDb {
  std::string path;
  TempDb() {
    char tmpl[] = "/tmp/causeway-test-XXXXXX";
    path = std::string(mkdtemp(tmpl)) + "/t.db";
  }
  ~TempDb() {
    std::error_code ec;
    std::filesystem::remove_all(std::filesystem::path(path).parent_path(), ec);
  }
  TempDb(const TempDb&) = delete;
  TempDb& operator=(const TempDb&) = delete;
};
