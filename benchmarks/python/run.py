#!/usr/bin/python3
"""crema's Python loader beside crema-feed (the same pipeline in C++) and torchvision's
DataLoader, on a folder of JPEGs cut from photographs (benchmarks/jpeg_input/make_dataset.py),
through RandomResizedCrop(224) + flip + Normalize and Resize(256) + CenterCrop(224) + Normalize,
batches of 32, on 1 and 2 threads (torchvision: 0, 1 and 2 workers), each in a process of its
own, in interleaved rounds; prints each median with its ratios, the Python-side time per batch,
and the peak memory (PSS of the process and its workers, from a round of its own after the timed
ones, since sampling it costs CPU), with the machine; writes the JSON.
DALI's CPU pipeline and FFCV's Loader (1 and 2 threads each) are measured where --peers-python
imports them (a virtual environment of its own: pip install nvidia-dali-cuda120, which runs on
the CPU without a GPU; FFCV 1.0.2 with numpy 1.24, numba 0.58 and opencv-python 4.8, after
Debian's libopencv-dev, which its setup needs); FFCV reads a .beton written from the folder.

    run.py [--folder DIR] [--images 1000] [--rounds 3] [--python VENV_PYTHON] [--feed CREMA_FEED]
           [--peers-python PYTHON] [--out benchmarks-python.json]
"""

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import tempfile
import threading
import time

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]
NORMALIZE = "0.485,0.456,0.406/0.229,0.224,0.225"


def photo_shards(work, images, shards_tool, folder=None):
    """A folder of `images` photographs (made in `work` unless given) written as WebDataset
    shards of about 64 MiB (work/shards/shard-NNNNNN.tar): (folder, shards' folder)."""
    work = pathlib.Path(work)
    if folder is None:
        folder = work / "photos"
        subprocess.run(["/usr/bin/python3", str(REPO / "benchmarks" / "jpeg_input" /
                                                "make_dataset.py"), str(folder), "--images",
                        str(images)], check=True)
    shards = work / "shards"
    shards.mkdir()
    subprocess.run([str(shards_tool), "write", str(folder), str(shards), "--shard-bytes",
                    str(64 << 20), "--shard-samples", "1000000"], check=True,
                   stdout=subprocess.DEVNULL)
    return pathlib.Path(folder), shards


def machine():
    fields = {}
    for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    return (f"{fields.get('Model name', '?')}, {os.cpu_count()} cores, "
            f"L2 {fields.get('L2 cache', '?')}, L3 {fields.get('L3 cache', '?')}")


def tree_memory_kib(pid):
    """The PSS (shared pages counted once overall) and the RSS (each process's own count, as
    `ps` and most monitors add them) of a process and its descendants, in KiB."""
    pss = rss = 0
    pending = [pid]
    while pending:
        current = pending.pop()
        try:
            with open(f"/proc/{current}/smaps_rollup") as rollup:
                for line in rollup:
                    if line.startswith("Pss:"):
                        pss += int(line.split()[1])
                    elif line.startswith("Rss:"):
                        rss += int(line.split()[1])
            with open(f"/proc/{current}/task/{current}/children") as children:
                pending += [int(child) for child in children.read().split()]
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
    return pss, rss


def measure(command, memory=False):
    """Runs `command`; returns its last JSON line, with the peak PSS and RSS of its process tree
    (MiB) where `memory` asks for them. Memory is sampled in runs of its own, never in a timed
    one: reading the smaps of a process that has imported PyTorch costs about 1.7 ms of CPU
    (0.04 ms for crema-feed's), every 20 ms, taken from the producers on a machine whose cores
    they fill."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    peak = [0, 0]
    done = threading.Event()

    def sample():
        while not done.is_set():
            pss, rss = tree_memory_kib(process.pid)
            peak[0] = max(peak[0], pss)
            peak[1] = max(peak[1], rss)
            time.sleep(0.02)

    sampler = threading.Thread(target=sample)
    if memory:
        sampler.start()
    out, err = process.communicate()
    done.set()
    if memory:
        sampler.join()
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{err}")
    result = json.loads(out.strip().splitlines()[-1])
    if memory:
        result["peak_pss_mib"] = peak[0] / 1024
        result["peak_rss_mib"] = peak[1] / 1024
    return result


def print_summary(results, memory, rounds):
    """Prints the medians of the timed rounds, their ratios, and the memory round's peaks."""
    def median(case, loader, threads, field="samples_per_s"):
        if field.startswith("peak_"):
            return memory[(case, loader, threads)][field]
        return statistics.median(r[field] for r in results[(case, loader, threads)])

    names = {"rrc": "RandomResizedCrop(224) + flip + Normalize",
             "eval": "Resize(256) + CenterCrop(224) + Normalize"}
    for case in ("rrc", "eval"):
        best_workers = max((0, 1, 2), key=lambda w: median(case, "torchvision", w))
        best = median(case, "torchvision", best_workers)
        print(f"{names[case]}, batches of 32, {rounds} rounds (medians):")
        for workers in (0, 1, 2):
            print(f"  torchvision DataLoader, {workers} workers: "
                  f"{median(case, 'torchvision', workers):7.0f} samples/s, peak PSS "
                  f"{median(case, 'torchvision', workers, 'peak_pss_mib'):5.0f} MiB, RSS "
                  f"{median(case, 'torchvision', workers, 'peak_rss_mib'):5.0f} MiB")
        peers = [(peer, title) for peer, title in (("dali", "DALI's CPU pipeline"),
                                                   ("ffcv", "FFCV's Loader"))
                 if (case, peer, 2) in results]
        for peer, title in peers:
            for threads in (1, 2):
                print(f"  {title}, {threads} thread(s): "
                      f"{median(case, peer, threads):7.0f} samples/s, peak PSS "
                      f"{median(case, peer, threads, 'peak_pss_mib'):5.0f} MiB, RSS "
                      f"{median(case, peer, threads, 'peak_rss_mib'):5.0f} MiB")
        for threads in (1, 2):
            python = median(case, "crema", threads)
            native = median(case, "crema-feed", threads)
            against_peers = "".join(
                f", {python / max(median(case, peer, t) for t in (1, 2)):.1f} x "
                f"{peer.upper()}'s best" for peer, _ in peers)
            print(f"  crema.Loader, {threads} thread(s): {python:7.0f} samples/s = "
                  f"{python / native:.2f} x crema-feed ({native:.0f}), "
                  f"{python / best:.1f} x torchvision's best ({best_workers} workers)"
                  f"{against_peers}; "
                  f"peak PSS {median(case, 'crema', threads, 'peak_pss_mib'):.0f} MiB, "
                  f"RSS {median(case, 'crema', threads, 'peak_rss_mib'):.0f} MiB")
        print(f"  a ready batch costs the loop "
              f"{median(case, 'crema-ready', 2, 'python_us_per_batch'):.1f} us of CPU (median), "
              f"{median(case, 'crema-ready', 2, 'python_us_first_after_idle'):.1f} us the "
              f"first after an idle second")
        for kind in ("pss", "rss"):
            ratio = (median(case, "crema", 2, f"peak_{kind}_mib") /
                     median(case, "torchvision", 2, f"peak_{kind}_mib"))
            print(f"  memory ({kind.upper()}): crema.Loader on 2 threads / torchvision with 2 "
                  f"workers = {ratio:.2f}")


def report(path):
    """Prints the summary of the runs an earlier call wrote to `path`."""
    results, memory = {}, {}
    rounds = set()
    with open(path) as lines:
        for line in lines:
            result = json.loads(line)
            key = (result["case"], result["loader"], result["threads"])
            if result["round"] == "memory":
                memory[key] = result
            else:
                rounds.add(result["round"])
                results.setdefault(key, []).append(result)
    print(f"machine: {next(iter(results.values()))[0]['machine']}")
    print_summary(results, memory, len(rounds))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=pathlib.Path)
    parser.add_argument("--images", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--python", default=str(REPO / "build" / "venv" / "bin" / "python"))
    parser.add_argument("--feed", default=None)
    parser.add_argument("--peers-python",
                        default=str(REPO / "build" / "venv-peers" / "bin" / "python"),
                        help="the interpreter that imports DALI (and FFCV)")
    parser.add_argument("--out", default="benchmarks-python.json")
    parser.add_argument("--report", type=pathlib.Path,
                        help="print the summary of an earlier run's JSON, measuring nothing")
    args = parser.parse_args()
    if args.report is not None:
        return report(args.report)
    feed_tool = args.feed
    if feed_tool is None:
        for build in ("release", "dev"):
            candidate = REPO / "build" / build / "examples" / "crema-feed"
            if candidate.is_file():
                feed_tool = str(candidate)
                break
    if feed_tool is None:
        raise SystemExit("no crema-feed: build the release preset, or pass --feed")
    folder = args.folder
    if folder is None:
        folder = pathlib.Path(tempfile.mkdtemp(prefix="crema-python-bench-"))
        subprocess.run(["/usr/bin/python3", str(REPO / "benchmarks" / "jpeg_input" /
                                                "make_dataset.py"), str(folder), "--images",
                        str(args.images)], check=True)
    feed = str(HERE / "feed.py")
    peers = []
    installed = set()
    for name, module in (("FFCV", "ffcv"), ("DALI", "nvidia.dali")):
        found = subprocess.run([args.peers_python, "-c", f"import {module}"],
                               capture_output=True)
        if found.returncode != 0:
            peers.append(f"{name} is not installed for {args.peers_python}: not measured")
        else:
            installed.add(name)
    beton = None
    if "FFCV" in installed:  # FFCV reads its own file, written once from the folder
        beton = pathlib.Path(tempfile.mkdtemp(prefix="crema-python-bench-ffcv-")) / "data.beton"
        subprocess.run([args.peers_python, str(HERE / "feed.py"), "ffcv-write", str(folder),
                        "--beton", str(beton)], check=True, capture_output=True)
    print(f"machine: {machine()}")
    for line in peers:
        print(line)

    def crema_feed(case, threads):
        geometry = (["--random-resized-crop", "224", "--mirror"] if case == "rrc"
                    else ["--resize", "256", "--center-crop", "224"])
        return [feed_tool, "--images", str(folder), "--batch", "32", *geometry, "--normalize",
                NORMALIZE, "--producers", str(threads), "--threads", str(threads), "--epochs",
                "3", "--json"]

    configurations = []
    for case in ("rrc", "eval"):
        for threads in (1, 2):
            configurations.append((case, "crema", threads,
                                   [args.python, feed, "crema", str(folder), "--case", case,
                                    "--threads", str(threads)]))
            configurations.append((case, "crema-feed", threads, crema_feed(case, threads)))
        configurations.append((case, "crema-ready", 2,
                               [args.python, feed, "crema", str(folder), "--case", case,
                                "--threads", "2", "--ready"]))
        for workers in (0, 1, 2):
            configurations.append((case, "torchvision", workers,
                                   ["/usr/bin/python3", feed, "torchvision", str(folder),
                                    "--case", case, "--threads", str(workers)]))
        for peer, root in (("dali", folder), ("ffcv", beton)):
            if (peer == "dali" and "DALI" not in installed) or root is None:
                continue
            for threads in (1, 2):
                configurations.append((case, peer, threads,
                                       [args.peers_python, feed, peer, str(root), "--case",
                                        case, "--threads", str(threads)]))
    results = {}
    memory = {}
    with open(args.out, "w") as out:
        for round_number in range(args.rounds):
            for case, loader, threads, command in configurations:
                result = measure(command)
                result.update({"case": case, "loader": loader, "threads": threads,
                               "round": round_number, "machine": machine()})
                out.write(json.dumps(result) + "\n")
                results.setdefault((case, loader, threads), []).append(result)
        # The memory round, after the timed ones.
        for case, loader, threads, command in configurations:
            if loader == "crema-ready":
                continue
            result = measure(command, memory=True)
            result.update({"case": case, "loader": loader, "threads": threads,
                           "round": "memory", "machine": machine()})
            out.write(json.dumps(result) + "\n")
            memory[(case, loader, threads)] = result

    print_summary(results, memory, args.rounds)
    print(f"every run: {args.out}")


if __name__ == "__main__":
    main()
