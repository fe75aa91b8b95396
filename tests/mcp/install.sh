#!/bin/sh
# Installs the MCP client the `mcp` ctest drives (@modelcontextprotocol/inspector-cli,
# version pinned in package.json) into tests/mcp/node_modules. Needs npm and network
# once; the test itself runs offline.
set -eu
cd "$(dirname "$0")"
npm install --no-audit --no-fund --loglevel=error
