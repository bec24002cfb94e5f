#!/usr/bin/env bash
# What docs/building.md tells a new user to do, checked: configure a fresh tree, build only its
# libraries, install it, then build and run a program against the prefix through
# find_package(crema REQUIRED COMPONENTS ...) with every component this machine has, and again
# through the pkg-config files. CI's install stage; also the test packaging.install_unbuilt.
#   tools/install-check.sh [WORK_DIR]   (default: a temporary folder, removed at the end)
set -euo pipefail
source_dir=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-}
if [[ -z $work ]]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi
rm -rf "$work/build" "$work/prefix" "$work/consumer" "$work/pkg-config"
mkdir -p "$work"
build=$work/build
prefix=$work/prefix
step() { echo "install-check: $*"; }
fail() { echo "install-check: FAILED: $*" >&2; exit 1; }

step "cmake --preset release -B $build -DCMAKE_INSTALL_PREFIX=$prefix"
cmake -S "$source_dir" --preset release -B "$build" -DCMAKE_INSTALL_PREFIX="$prefix" >"$work/configure.log" 2>&1 ||
  { cat "$work/configure.log"; fail "configure"; }
step "cmake --build $build --target crema_libraries (the libraries alone)"
cmake --build "$build" --target crema_libraries >"$work/build.log" 2>&1 ||
  { cat "$work/build.log"; fail "build the libraries"; }
step "cmake --install $build (nothing else built)"
cmake --install "$build" >"$work/install.log" 2>&1 || { cat "$work/install.log"; fail "install"; }
[[ -f $prefix/include/crema/crema.hpp ]] || fail "no include/crema/crema.hpp in $prefix"
# Under lib/ when a component was compiled into a library, else under share/.
config=$(find "$prefix" -path '*/cmake/crema/cremaConfig.cmake' | head -n 1)
[[ -n $config ]] || fail "no CMake package in $prefix"
package_dir=$(dirname "$(dirname "$(dirname "$config")")")
[[ -f $package_dir/pkgconfig/crema.pc ]] || fail "no crema.pc beside $config"
[[ ! -e $prefix/bin/crema-lmdb ]] || fail "a tool was installed though only the libraries were built"

# The components this install has, as its package says.
components=$(sed -nE 's/^set\(crema_INSTALLED_COMPONENTS "(.*)"\)$/\1/p' \
  "$config" | tr ';' ' ')
step "components: ${components:-none}"

step "find_package(crema REQUIRED COMPONENTS ${components})"
cmake -S "$source_dir/tests/consumers/find_package" -B "$work/consumer" -G Ninja \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_PACKAGE_PREFER_CONFIG=ON \
  "-DCREMA_TEST_COMPONENTS=${components// /;}" >"$work/consumer.log" 2>&1 ||
  { cat "$work/consumer.log"; fail "configure the find_package consumer"; }
cmake --build "$work/consumer" >>"$work/consumer.log" 2>&1 ||
  { cat "$work/consumer.log"; fail "build the find_package consumer"; }
"$work/consumer/consumer"
"$work/consumer/components"

modules=(crema)
defines=()
for component in $components; do
  modules+=("crema-$component")
  defines+=("-DCREMA_USES_${component^^}")
done
step "c++ -std=c++20 \$(pkg-config --cflags --libs ${modules[*]})"
export PKG_CONFIG_PATH="$package_dir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
mkdir -p "$work/pkg-config"
read -ra flags <<<"$(pkg-config --cflags --libs "${modules[@]}")" || fail "pkg-config ${modules[*]}"
"${CXX:-c++}" -std=c++20 -O1 "${defines[@]}" "$source_dir/tests/consumers/components.cpp" \
  "${flags[@]}" -o "$work/pkg-config/components" || fail "build the pkg-config consumer"
library_path=$(pkg-config --libs-only-L "${modules[@]}" | sed -E 's/(^| )-L/:/g; s/^://; s/ //g')
LD_LIBRARY_PATH="${library_path}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$work/pkg-config/components"
step "ok: installed with only the libraries built, consumed by find_package and pkg-config"
