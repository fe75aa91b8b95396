// SPDX-License-Identifier: Apache-2.0
// Writes the small known trace of tests/unit/query_fixture.h to argv[1], for
// the tests that drive the real binary (MCP client, headless browser).
#include <cstdio>
#include <filesystem>

#include "../unit/query_fixture.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT.db\n", argv[0]);
    return 2;
  }
  std::filesystem::remove(argv[1]);
  causeway::testing::TempTrace t;
  t.write(causeway::testing::known_batch());
  std::filesystem::copy_file(t.path, argv[1]);
  return 0;
}
