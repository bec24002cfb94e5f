#!/usr/bin/env bash
# Builds crema's demo in the release preset and runs it. The demo makes its own data.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target crema-demo
./build/release/examples/crema-demo "$@"
