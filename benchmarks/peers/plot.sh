#!/usr/bin/env bash
# Draws run.sh's JSON lines as a bar chart (samples/s, log scale; PyTorch with w workers and
# crema-feed per case) into an SVG, with gnuplot (Debian's gnuplot-nox, installed when missing).
#   benchmarks/peers/plot.sh [IN.json] [OUT.svg]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
in=${1:-benchmarks-peers.json}
out=${2:-$here/../../docs/images/caffe_data_layer_peers.svg}
command -v gnuplot >/dev/null || bash "$here/../../tools/install-deps.sh" gnuplot-nox
mkdir -p "$(dirname "$out")"
data=$(mktemp)
trap 'rm -f "$data"' EXIT
python3 - "$in" >"$data" <<'PY'
import json, sys
import statistics
rates = {}
for line in open(sys.argv[1]):
    record = json.loads(line)
    name = "crema-feed" if "workers" not in record else f"PyTorch w={record['workers']}"
    rates.setdefault(name, {}).setdefault(record["case"], []).append(record["samples_per_s"])
rows = {name: {case: statistics.median(values) for case, values in cases.items()}
        for name, cases in rates.items()}
for name in ["PyTorch w=0", "PyTorch w=1", "PyTorch w=2", "crema-feed"]:
    if name in rows:
        print(f"\"{name}\" {rows[name].get('small', 0)} {rows[name].get('large', 0)}")
PY
gnuplot <<GP
set terminal svg size 720,400 font "sans,12"
set output "$out"
set title "Caffe LMDB into batches, 2 cores: samples/s (log scale)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set logscale y
set yrange [1000:*]
set key top left
set xtics nomirror
set grid ytics
plot "$data" using 2:xtic(1) title "50,000 x 3x32x32, crop 28, batch 64", \
     "" using 3 title "5,000 x 3x256x256, crop 224, batch 32"
GP
echo "plot in $out"
