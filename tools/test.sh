#!/usr/bin/env bash
# Builds crema and passes its tests: Debian packages first, then the dev workflow preset
# (configure, build, run every test).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
cmake --workflow --preset dev
