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
# The webdataset library, for the test that reads the shards its ShardWriter writes (PyPI; the
# test says it skipped where it cannot be installed).
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "webdataset>=0.2" ||
  echo "python-test: the webdataset library could not be installed; its interop test skips"
if [[ -z ${CREMA_FEED:-} && -x build/dev/examples/crema-feed ]]; then
  export CREMA_FEED=$PWD/build/dev/examples/crema-feed
fi
# From outside the tree, so that `import crema` is the installed package, not python/src.
(cd python/tests && "../../$venv/bin/python" -m pytest -p no:cacheprovider "$@" .)

# crema.Loader(device="cuda:N") without a GPU: the same package built with CUDA on the counting
# CUDA runtime of crema's tests (CREMA_PYTHON_COUNTING_CUDA), in a virtual environment of its
# own, runs test_device.py; with nvJPEG's header where there is one (the fake nvJPEG of those
# tests stands for the library). Needs the CUDA toolkit's headers only; skipped where there are
# none.
cuda_root=${CUDA_HOME:-/usr/local/cuda}
if [[ -e $cuda_root/include/cuda_runtime_api.h ]]; then
  counting=build/venv-counting-cuda
  if [[ ! -x $counting/bin/python ]]; then
    /usr/bin/python3 -m venv --system-site-packages "$counting"
  fi
  "$counting/bin/python" -m pip install --quiet --disable-pip-version-check \
    --config-settings "build-dir=build/python-counting-cuda/{wheel_tag}" \
    --config-settings cmake.define.CREMA_ENABLE_CUDA=ON \
    --config-settings cmake.define.CREMA_ENABLE_NVJPEG=AUTO \
    --config-settings cmake.define.CREMA_PYTHON_COUNTING_CUDA=ON \
    --config-settings "cmake.define.CUDAToolkit_ROOT=$cuda_root" .
  (cd python/tests &&
    "../../$counting/bin/python" -m pytest -p no:cacheprovider "$@" test_device.py)
else
  echo "python-test: no CUDA toolkit headers under $cuda_root; the device tests are skipped"
fi
