#!/bin/sh
# Installs the schema validator the `fleet_manifests` ctest runs
# (kubernetes-models and the Prometheus operator's models, versions pinned in
# package.json) into tests/fleet/node_modules. Needs npm and network once; the
# test itself runs offline.
set -eu
cd "$(dirname "$0")"
npm install --no-audit --no-fund --loglevel=error
