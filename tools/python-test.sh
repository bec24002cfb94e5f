#!/usr/bin/env bash
# Builds crema's Python package (`pip install .`) into a virtual environment that sees the
# system's site packages (Debian's torch, numpy, lmdb; Debian's Python refuses system-wide pip
# installs), then passes its tests. Part of the README's test command (tools/test.sh), after the
# dev build, whose crema-feed the tests compare batches with.
#   tools/python-test.sh [PYTEST ARGS...]
set -euo pipefail
cd "$(dirname "$0")/.."
venv=build/venv
if [[ ! -x $venv/bin/python ]]; then
  /usr/bin/python3 -m venv --system-site-packages "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check .
if [[ -z ${CREMA_FEED:-} && -x build/dev/examples/crema-feed ]]; then
  export CREMA_FEED=$PWD/build/dev/examples/crema-feed
fi
# From outside the tree, so that `import crema` is the installed package, not python/src.
cd python/tests
"../../$venv/bin/python" -m pytest -p no:cacheprovider "$@" .
