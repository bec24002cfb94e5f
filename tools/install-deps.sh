#!/usr/bin/env bash
# Installs the Debian packages crema's build, tests, demo and benchmarks need, when missing
# (python3-pil: the image tests compare crema's resampling with Pillow's; python3-venv, -dev,
# -numpy, -torch, -pytest and -lmdb: the Python package is built and tested in a virtual
# environment that sees Debian's torch and numpy; libcurl4-openssl-dev: crema::http).
# Idempotent and quiet when everything is there. Run as root (or with sudo) on Debian 12.
# Given package names, installs those instead (what a benchmark driver needs beyond them).
# Where a CUDA toolkit without nvJPEG is installed, also puts PyPI's nvidia-nvjpeg wheel (its
# header and library) in /opt/nvjpeg-wheel, where CMake looks for it (crema::nvjpeg).
#   tools/install-deps.sh [PACKAGE...]
set -euo pipefail

packages=(
  cmake ninja-build g++ clang libclang-rt-14-dev pkg-config
  libfmt-dev libconcurrentqueue-dev doctest-dev libbenchmark-dev
  liblmdb-dev libturbojpeg0-dev libjpeg62-turbo-dev libspng-dev libopenmpi-dev openmpi-bin iproute2
  libcurl4-openssl-dev openssl
  python3-pil python3-venv python3-dev python3-numpy python3-torch python3-torchvision
  python3-pytest python3-lmdb libtorch-dev
)
if (($#)); then packages=("$@"); fi

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$package")
done

if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi

# nvJPEG for crema::nvjpeg: the toolkit's own where it has one, else the wheel's.
nvjpeg_wheel=/opt/nvjpeg-wheel
if (($# == 0)) && [[ -x /usr/local/cuda/bin/nvcc ]] && [[ ! -e /usr/local/cuda/include/nvjpeg.h ]] &&
   [[ ! -e ${nvjpeg_wheel}/nvidia/cu13/include/nvjpeg.h ]]; then
  echo "install-deps: installing nvidia-nvjpeg (PyPI) into ${nvjpeg_wheel}"
  python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore \
    --target "${nvjpeg_wheel}" "nvidia-nvjpeg>=13,<14" ||
    echo "install-deps: nvidia-nvjpeg could not be installed; crema::nvjpeg will be off"
fi
