#!/usr/bin/env bash
# Builds crema and passes its tests: Debian packages first, then the dev workflow preset
# (configure, build, run every C++ test), then the Python package in a virtual environment and
# its pytest suite (tools/python-test.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
cmake --workflow --preset dev
bash tools/python-test.sh
