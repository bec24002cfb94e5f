#!/usr/bin/env bash
# Installs the Debian packages crema's build, tests, demo and benchmarks need, when missing
# (python3-pil: the image tests compare crema's resampling with Pillow's).
# Idempotent and quiet when everything is there. Run as root (or with sudo) on Debian 12.
# Given package names, installs those instead (what a benchmark driver needs beyond them).
#   tools/install-deps.sh [PACKAGE...]
set -euo pipefail

packages=(
  cmake ninja-build g++ clang libclang-rt-14-dev pkg-config
  libfmt-dev libconcurrentqueue-dev doctest-dev libbenchmark-dev
  liblmdb-dev libturbojpeg0-dev libjpeg62-turbo-dev libspng-dev libopenmpi-dev openmpi-bin iproute2
  python3-pil
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
