#!/bin/sh
# ctest `mcp_inspector_client`: CAUSEWAY FIXTURE_WRITER ARTIFACT_DIR
set -eu
here="$(cd "$(dirname "$0")" && pwd)"
causeway="$1"; fixture="$2"; artifacts="$3"
if [ ! -x "$here/node_modules/.bin/mcp-inspector-cli" ]; then
  echo "FAIL: the MCP Inspector CLI is not installed: run tests/mcp/install.sh" >&2
  exit 1
fi
mkdir -p "$artifacts"
"$fixture" "$artifacts/trace.db" contention
exec node "$here/inspector_test.mjs" "$causeway" "$artifacts/trace.db" "$artifacts"
