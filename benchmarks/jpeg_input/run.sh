#!/usr/bin/env bash
# crema-feed --images beside the decode-only loop (in crema-feed's own run) and torchvision's
# ImageFolder + DataLoader, on an ImageNet-like folder made from scikit-image's photographs
# (make_dataset.py: 3,000 JPEGs, short side 300-500): RandomResizedCrop(224) + flip + Normalize,
# and Resize(256) + CenterCrop(224) + Normalize; batches of 32; crema on 1 and 2 producers on as
# many threads (median of 3 runs of 2 epochs, exact and reduced-detail output in interleaved
# rounds), torchvision with 0, 1 and 2 workers (median of 3
# epochs). Then Caffe's path: 5,000 photographs of 256 x 256 (quality 90) as encoded Datums
# (crema-lmdb convert --encoded), crop 224 + mirror + mean values, beside crema-feed's loop that
# only decodes the same records. Installs python3-torchvision and python3-skimage when missing
# (not CI's job: run it by hand). Prints each figure and its ratios; writes every JSON line to OUT.
#   benchmarks/jpeg_input/run.sh [BUILD_DIR] [OUT] [FOLDER]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../../build/release}
out=${2:-benchmarks-jpeg-input.json}
folder=${3:-}
bash "$here/../../tools/install-deps.sh" python3-torchvision python3-skimage python3-pil
temporary=()
trap 'rm -rf "${temporary[@]}"' EXIT
if [[ -z $folder ]]; then
  folder=$(mktemp -d)
  temporary+=("$folder")
  /usr/bin/python3 "$here/make_dataset.py" "$folder" --images 3000
fi
feed_tool=$build/examples/crema-feed
: >"$out"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"
median() { python3 -c "import statistics, sys; print(statistics.median(map(float, sys.argv[1:])))" "$@"; }
field() { python3 -c "import json, sys; print(json.loads(sys.argv[1])[sys.argv[2]])" "$1" "$2"; }
# run_case NAME TORCHVISION_ARGS CREMA_ARGS...: TORCHVISION_ARGS is one word list, unquoted.
run_case() {
  local name=$1 peer_args=$2
  shift 2
  local crema_args=("$@")
  local best=0 line rate
  while read -r line; do
    echo "$line" | sed "s/^{/{\"case\": \"$name\", /" >>"$out"
    rate=$(field "$line" samples_per_s)
    printf '  %-5s torchvision, %s workers: %8.0f samples/s\n' "$name" "$(field "$line" workers)" "$rate"
    best=$(python3 -c "print(max($best, $rate))")
  # shellcheck disable=SC2086  # the peer's arguments are one word list
  done < <(/usr/bin/python3 "$here/torchvision_feed.py" "$folder" --batch 32 $peer_args)
  # The default output and reduced detail in interleaved rounds. Each run's rate is taken over
  # the decode-only loop of the same run (this machine's drift between runs is larger than the
  # differences measured); the figures are the medians of the rates and of those ratios.
  for threads in 1 2; do
    local exact=() reduced=() exact_ratios=() reduced_ratios=() detail rate ratio
    for _ in 1 2 3; do
      for detail in default reduced; do
        local flags=()
        [[ $detail == reduced ]] && flags=(--reduced-detail)
        line=$("$feed_tool" --images "$folder" --batch 32 "${crema_args[@]}" "${flags[@]}" \
          --normalize 0.485,0.456,0.406/0.229,0.224,0.225 --producers "$threads" \
          --threads "$threads" --epochs 2 --json)
        echo "$line" | sed "s/^{/{\"case\": \"$name\", /" >>"$out"
        rate=$(field "$line" samples_per_s)
        ratio=$(python3 -c "print($rate / $(field "$line" decode_only_samples_per_s))")
        if [[ $detail == default ]]; then
          exact+=("$rate")
          exact_ratios+=("$ratio")
        else
          reduced+=("$rate")
          reduced_ratios+=("$ratio")
        fi
      done
    done
    local crema
    crema=$(median "${exact[@]}")
    printf '  %-5s crema-feed, %d thread(s): %8.0f samples/s, %.2f of decode only; ' \
      "$name" "$threads" "$crema" "$(median "${exact_ratios[@]}")"
    printf 'best torchvision %8.0f (ratio %.1f)\n' "$best" "$(python3 -c "print($crema / $best)")"
    printf '  %-5s   reduced detail:     %8.0f samples/s, %.2f of decode only\n' \
      "$name" "$(median "${reduced[@]}")" "$(median "${reduced_ratios[@]}")"
  done
}
run_case train "--random-resized-crop 224" --random-resized-crop 224 --mirror
run_case eval "--resize 256 --center-crop 224" --resize 256 --center-crop 224

# Caffe's path: encoded 256 x 256 Datums.
squares=$(mktemp -d)
temporary+=("$squares")
/usr/bin/python3 "$here/make_dataset.py" "$squares/images" --images 5000 --square 256 \
  --quality 90 --list "$squares/list.txt"
"$build/examples/crema-lmdb" convert "$squares/images" "$squares/list.txt" "$squares/db" \
  --encoded >/dev/null
for threads in 1 2; do
  rates=()
  ratios=()
  for _ in 1 2 3; do
    line=$("$feed_tool" "$squares/db" --batch 32 --crop 224 --mirror --mean-values 104,117,123 \
      --producers "$threads" --threads "$threads" --epochs 2 --json)
    echo "$line" | sed 's/^{/{"case": "caffe", /' >>"$out"
    rates+=("$(field "$line" samples_per_s)")
    ratios+=("$(python3 -c "print(${rates[-1]} / $(field "$line" decode_only_samples_per_s))")")
  done
  printf '  caffe crema-feed, %d thread(s): %8.0f samples/s, %.2f of decode only\n' \
    "$threads" "$(median "${rates[@]}")" "$(median "${ratios[@]}")"
done
echo "figures in $out"
