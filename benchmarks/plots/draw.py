#!/usr/bin/python3
"""Draws the figures of docs/performance.md as PNG from the benchmarks' own output, with gnuplot
(Debian's gnuplot-nox). Every plot shows crema beside the baseline measured in the same run and
names the machine it came from; beside each plot, the script prints its figures as a Markdown
table (what docs/performance.md shows). benchmarks/plots/run.sh runs the benchmarks and then this
script; to redraw from kept results:

    benchmarks/plots/draw.py RESULTS_DIR [IMAGES_DIR, default docs/images]

RESULTS_DIR holds what run.sh writes; each plot is drawn when its inputs are there:
  feed_vs_pytorch.png    peers.json            (benchmarks/peers/run.sh)
  feed_vs_hand_loop.png  caffe_data_layer.json (crema-bench-caffe_data_layer --benchmark_out)
  coordination.png       pipeline_handoff.json, pipeline.json
  allreduce.png          reducer.json, mpi_allreduce.txt (benchmarks/reducer/compare_with_mpi.sh)
"""

import json
import os
import re
import statistics
import subprocess
import sys

CREMA = "#1f5fa8"
BASELINE = "#9a9a9a"
SECOND_BASELINE = "#d08c2c"
THIRD = "#6aa5de"

# The two datasets of the data-layer benchmarks (benchmarks/caffe_data_layer/shape.hpp).
CASES = {"small": "50,000 x 3x32x32, crop 28, batch 64",
         "large": "5,000 x 3x256x256, crop 224, batch 32"}


def benchmark_figures(path):
    """{run name: {"real_time": ns, "items_per_second": x}} from Google Benchmark's JSON: the
    median aggregate where there are repetitions, else the mean of the iteration runs."""
    with open(path) as file:
        document = json.load(file)
    medians, runs = {}, {}
    for entry in document["benchmarks"]:
        unit = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[entry.get("time_unit", "ns")]
        figures = {"real_time": entry["real_time"] * unit}
        if "items_per_second" in entry:
            figures["items_per_second"] = entry["items_per_second"]
        name = entry["run_name"]
        if entry.get("run_type") == "aggregate":
            if entry.get("aggregate_name") == "median":
                medians[name] = figures
        else:
            runs.setdefault(name, []).append(figures)
    for name, samples in runs.items():
        if name not in medians:
            medians[name] = {key: statistics.mean(s[key] for s in samples) for key in samples[0]}
    return medians, document["context"]


def machine_line(context):
    """"AMD EPYC (L1d 48K, L2 1024K, L3 32768K), 2 CPUs, 2026-11-23" from a benchmark context."""
    machine = context.get("machine", "unknown machine")
    date = context.get("date", "")[:10]
    return f"{machine}, {context.get('num_cpus', '?')} CPUs, {date}"


def gnuplot(script):
    subprocess.run(["gnuplot"], input=script, text=True, check=True)


def datablock(name, rows):
    lines = "\n".join(" ".join(str(cell) for cell in row) for row in rows)
    return f"${name} << EOD\n{lines}\nEOD\n"


def plural(count, word):
    return f"{count} {word}{'' if count == 1 else 's'}"


def same_run_rates(figures, name):
    """(baseline, crema) items per second of the pair of benchmarks `name`, or None."""
    base = figures.get(f"baseline/{name}", {}).get("items_per_second")
    crema = figures.get(f"crema/{name}", {}).get("items_per_second")
    return (base, crema) if base and crema else None


def beside(block, title, rows, baseline_title, crema_title, log=False):
    """A panel of clustered bars: the baseline, then crema, per row of `rows`."""
    return (datablock(block, rows) +
            f'set title "{title}"\n' + ("set logscale y\n" if log else "set yrange [0:*]\n") +
            "set style data histograms\nset style histogram clustered gap 1\n"
            f"plot ${block} using 2:xtic(1) title '{baseline_title}' lc rgb '{BASELINE}', "
            f"'' using 3 title '{crema_title}' lc rgb '{CREMA}'\n")


def table(title, columns, rows):
    """Prints a Markdown table of a plot's figures, for docs/performance.md."""
    print(f"\n{title}\n")
    print("| " + " | ".join(columns) + " |")
    print("| --- " + "| ---: " * (len(columns) - 1) + "|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


def header(out, title, subtitle, panels, width=1000, height=460):
    return (f'set terminal pngcairo size {width},{height} font "sans,10" noenhanced\n'
            f'set output "{out}"\n'
            f'set multiplot layout 1,{panels} title "{title}\\n{subtitle}" font "sans,11"\n'
            "set style fill solid 0.85 border -1\n"
            "set grid ytics\nset xtics nomirror scale 0\nset key below horizontal\n")


def feed_vs_pytorch(results, images):
    path = os.path.join(results, "peers.json")
    if not os.path.exists(path):
        return None
    rates, machine = {}, "unknown machine"
    with open(path) as file:
        for line in file:
            record = json.loads(line)
            if "workers" in record:
                workers = record["workers"]
                bar = (0, workers, f"PyTorch\\n{plural(workers, 'worker')}")
            else:
                threads = record["threads"]
                bar = (1, threads, f"crema-feed\\n{plural(threads, 'thread')}")
                machine = record.get("machine", machine)
            rates.setdefault(record["case"], {}).setdefault(bar, []).append(record["samples_per_s"])
    out = os.path.join(images, "feed_vs_pytorch.png")
    script = header(out, "Caffe LMDB into float batches: samples/s (log scale), median of runs",
                    machine, 2)
    lines = []
    for case, label in CASES.items():
        bars = sorted(rates.get(case, {}).items())
        rows = [(f'"{name}"', statistics.median(values), 1 if side else 0)
                for (side, _, name), values in bars]
        if not rows:
            continue
        best = {side: max(row[1] for row in rows if row[2] == side) for side in (0, 1)}
        lines.append([label] + [f"{row[1]:,.0f}" for row in rows] +
                     [f"{best[1] / best[0]:.1f}x"])
        script += datablock(case, rows)
        top = 3 * max(row[1] for row in rows)  # room for the labels above the bars
        script += (f'set title "{label}"\nset logscale y\nset yrange [1000:{top}]\n'
                   'set format y "%.0s%c"\nset bmargin 4\nset boxwidth 0.7\n'
                   f"set palette defined (0 '{BASELINE}', 1 '{CREMA}')\nunset colorbox\n"
                   f"plot ${case} using 0:2:3:xtic(1) with boxes lc palette notitle, "
                   f"'' using 0:2:(sprintf('%.0f', $2)) with labels offset 0,0.8 notitle\n")
    gnuplot(script + "unset multiplot\n")
    names = [name.replace("\\n", " ") for (_, _, name), _ in sorted(rates["small"].items())]
    table(f"{os.path.basename(out)}: samples/s, {machine}", ["case"] + names + ["crema / PyTorch, best of each"],
          lines)
    return out


def feed_vs_hand_loop(results, images):
    path = os.path.join(results, "caffe_data_layer.json")
    if not os.path.exists(path):
        return None
    figures, context = benchmark_figures(path)
    out = os.path.join(images, "feed_vs_hand_loop.png")
    script = header(out, "The whole data layer (decode, crop, mirror, mean, scale) against a "
                    "hand-written loop on as many threads: thousand samples/s",
                    machine_line(context), 2)
    lines = []
    for case, label in CASES.items():
        rows = []
        for threads in (1, 2, 4):
            rates = same_run_rates(figures, f"data_layer/{case}/threads:{threads}/real_time")
            if rates:
                base, crema = rates
                rows.append((f'"{plural(threads, "thread")}"', base / 1e3, crema / 1e3))
                lines.append([label, str(threads), f"{base:,.0f}", f"{crema:,.0f}",
                              f"{crema / base:.0%}"])
        if rows:
            script += beside(case, label, rows, "hand-written loop", "crema pipeline")
    gnuplot(script + "unset multiplot\n")
    table(f"{os.path.basename(out)}: samples/s, {machine_line(context)}",
          ["case", "threads", "hand-written loop", "crema pipeline", "crema / loop"], lines)
    return out


def coordination(results, images):
    paths = [os.path.join(results, f"{name}.json") for name in ("pipeline_handoff", "pipeline")]
    if not all(os.path.exists(path) for path in paths):
        return None
    out = os.path.join(images, "coordination.png")
    context, panels, lines = {}, [], []
    for path, kind, label in zip(paths, ("handoff", "pipeline"),
                                 ("queue pair alone", "whole pipeline, transform copies")):
        figures, context = benchmark_figures(path)
        for payload in (0, 3072):
            rows = []
            for producers in (1, 2, 8):
                rates = same_run_rates(figures,
                                       f"{kind}/payload:{payload}/producers:{producers}/real_time")
                if rates:
                    base, crema = rates
                    rows.append((f'"{plural(producers, "producer")}"', base / 1e6, crema / 1e6))
                    lines.append([label, f"{payload:,} B", str(producers), f"{base / 1e6:.2f}",
                                  f"{crema / 1e6:.2f}", f"{crema / base:.1f}x"])
            panels.append((f"{kind}{payload}", f"{label}, {payload:,} B records", rows))
    script = header(out, "Moving records from producers to a consumer: crema against Caffe's pair "
                    "of blocking queues (mutex + condition variable), million records/s, log scale",
                    machine_line(context), 4, width=1400)
    for block, title, rows in panels:
        script += beside(block, title, rows, "Caffe pair", "crema", log=True)
    gnuplot(script + "unset multiplot\n")
    table(f"{os.path.basename(out)}: million records/s, {machine_line(context)}",
          ["scenario", "records", "producers", "Caffe pair", "crema", "speedup"], lines)
    return out


def allreduce(results, images):
    path = os.path.join(results, "reducer.json")
    mpi_path = os.path.join(results, "mpi_allreduce.txt")
    if not os.path.exists(path):
        return None
    figures, context = benchmark_figures(path)
    mpi = {}
    if os.path.exists(mpi_path):
        with open(mpi_path) as file:
            for line in file:
                found = re.match(r"mpi_allreduce MiB=(\d+) ranks=(\d+) seconds=([\d.eE+-]+)", line)
                if found:
                    mpi[(int(found[1]), int(found[2]))] = float(found[3])

    def bus_bandwidth(mib, participants, seconds):
        return (mib << 20) / seconds * 2 * (participants - 1) / participants / 1e9

    out = os.path.join(images, "allreduce.png")
    script = header(out, "Allreduce (average) of float buffers on host threads: bus bandwidth, "
                    "GB/s", machine_line(context), 2)
    lines = []
    for mib in (16, 64):
        rows = []
        for participants in (2, 4):
            def busbw(side, placement):
                name = (f"{side}/allreduce/MiB:{mib}/participants:{participants}/"
                        f"placement:{placement}/real_time")
                ns = figures.get(name, {}).get("real_time")
                return bus_bandwidth(mib, participants, ns * 1e-9) if ns else None
            placed = [busbw("crema", placement) for placement in range(6)]
            placed = [figure for figure in placed if figure]
            if not placed:
                continue
            seconds = mpi.get((mib, participants))
            copies = busbw("baseline", 0) or 0
            open_mpi = bus_bandwidth(mib, participants, seconds) if seconds else 0
            rows.append((f'"{participants} participants"', placed[0], min(placed), copies,
                         open_mpi))
            lines.append([f"{mib} x {participants}", f"{placed[0]:.2f}", f"{min(placed):.2f}",
                          f"{copies:.2f}", f"{open_mpi:.2f}",
                          f"{min(placed) / open_mpi:.2f}x" if open_mpi else "-"])
        script += datablock(f"size{mib}", rows)
        script += (f'set title "{mib} MiB per participant"\n'
                   "set yrange [0:*]\nset style data histograms\n"
                   "set style histogram clustered gap 1\n"
                   f"plot $size{mib} using 5:xtic(1) title 'Open MPI' lc rgb '{BASELINE}', "
                   f"'' using 4 title 'same bytes by memcpy' lc rgb '{SECOND_BASELINE}', "
                   f"'' using 3 title 'crema, worst buffer placement' lc rgb '{THIRD}', "
                   f"'' using 2 title 'crema, page-aligned' lc rgb '{CREMA}'\n")
    gnuplot(script + "unset multiplot\n")
    table(f"{os.path.basename(out)}: bus bandwidth, GB/s, {machine_line(context)}",
          ["MiB x participants", "crema, page-aligned", "crema, worst placement",
           "same bytes by memcpy", "Open MPI", "worst / Open MPI"], lines)
    return out


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    results = sys.argv[1]
    images = sys.argv[2] if len(sys.argv) > 2 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "images")
    os.makedirs(images, exist_ok=True)
    drawn = [out for draw in (feed_vs_pytorch, feed_vs_hand_loop, coordination, allreduce)
             if (out := draw(results, images))]
    if not drawn:
        sys.exit(f"draw.py: no benchmark results in {results}")
    for out in drawn:
        print(f"drew {os.path.normpath(out)}")


if __name__ == "__main__":
    main()
