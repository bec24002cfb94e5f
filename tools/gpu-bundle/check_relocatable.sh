#!/usr/bin/env bash
# check_relocatable.sh BUNDLE: the GPU test bundle works away from the build tree. Copies BUNDLE
# to a fresh folder, then checks that
#   - every shared library its programs load is either in the copy's lib/ or one
#     that a GPU machine provides (the C library, the driver, NCCL): nothing comes from the
#     build machine's /usr/lib or from the build tree;
#   - nothing in it names the build tree;
#   - run.sh runs there (on a machine without a GPU: what needs none, with --no-device-ok) and
#     prints its summary line.
set -euo pipefail
bundle=${1:?usage: check_relocatable.sh BUNDLE}
[[ -x $bundle/run.sh ]] || { echo "check_relocatable: no run.sh in '$bundle'" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -a "$bundle" "$work/bundle"
copy=$work/bundle
problems=0

# What the GPU machine provides, as assemble.cmake left it: one pattern a line.
[[ -s $copy/PROVIDED ]] || { echo "check_relocatable: no PROVIDED list in the bundle"; exit 1; }
provided="($(paste -sd'|' "$copy/PROVIDED"))"
# ldd of a program lists everything the process loads, its libraries' own needs included (a
# library that lib/ holds is loaded from there once, for every one that needs it).
for file in "$copy"/bin/*; do
  while read -r name arrow path _; do
    [[ $arrow == "=>" ]] || continue
    name=${name##*/}
    [[ $name =~ $provided ]] && continue
    [[ -e $path ]] && path=$(realpath "$path")
    if [[ $path != "$copy"/lib/* ]]; then
      echo "check_relocatable: ${file#"$copy"/} loads $name from '${path}', not from the bundle"
      problems=1
    fi
  done < <(ldd "$file" 2>/dev/null)
done

build_tree=$(cd "$bundle/.." && pwd)
if grep -rlF "$build_tree" "$copy" >/dev/null 2>&1; then
  echo "check_relocatable: these files name the build tree '$build_tree':"
  grep -rlF "$build_tree" "$copy" | sed "s|^$copy/|  |"
  problems=1
fi

set +e
(cd "$work" && "$copy/run.sh" --no-device-ok --results "$work/results") >"$work/run.log" 2>&1
status=$?
set -e
cat "$work/run.log"
if ((status != 0)); then
  echo "check_relocatable: run.sh exited with $status"
  problems=1
fi
grep -q '^gpu-bundle: ' "$work/run.log" || { echo "check_relocatable: no summary line"; problems=1; }
[[ -s $work/results/summary.json ]] || { echo "check_relocatable: no summary.json"; problems=1; }
# A benchmark the bundle lacks is bad usage, said before anything runs.
set +e
"$copy/run.sh" --benchmarks no_such_benchmark --no-device-ok --results "$work/unused" \
  >"$work/usage.log" 2>&1
status=$?
set -e
if ((status != 2)) || ! grep -q "no benchmark 'no_such_benchmark'" "$work/usage.log"; then
  echo "check_relocatable: run.sh --benchmarks with an unknown name exited with $status:"
  cat "$work/usage.log"
  problems=1
fi

((problems == 0)) && echo "check_relocatable: the bundle works from $copy"
exit "$problems"
