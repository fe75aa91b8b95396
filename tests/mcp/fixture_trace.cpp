// SPDX-License-Identifier: Apache-2.0
// Writes a known trace (tests/unit/query_fixture.h) to OUT.db, for the tests
// that drive the real binary (MCP client, headless browser):
//   known       the small known trace
//   contention  that plus CPU contention the explain engine diagnoses
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "../unit/query_fixture.h"

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3 ||
      (argc == 3 && std::strcmp(argv[2], "known") && std::strcmp(argv[2], "contention"))) {
    std::fprintf(stderr, "usage: %s OUT.db [known|contention]\n", argv[0]);
    return 2;
  }
  std::filesystem::remove(argv[1]);
  causeway::testing::TempTrace t;
  auto batch = causeway::testing::known_batch();
  if (argc == 3 && std::strcmp(argv[2], "contention") == 0) {
    auto more = causeway::testing::contention_batch();
    batch.append(std::move(more));
  }
  t.write(batch);
  std::filesystem::copy_file(t.path, argv[1]);
  return 0;
}
