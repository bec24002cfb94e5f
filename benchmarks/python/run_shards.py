#!/usr/bin/python3
"""Training input from WebDataset tar shards against the same photographs in a folder, and against
the loaders users read shards with today: crema.Loader over the shards (crema.WebDataset) and over
the folder, on 1 and 2 threads; the webdataset library's pipeline with torchvision's transforms in
a DataLoader (1 and 2 workers); DALI's readers.webdataset on the CPU (1 and 2 threads). All through
RandomResizedCrop(224) + flip + Normalize into float batches of 32, each run a process of its own,
in interleaved rounds; prints the medians and ratios with the machine, writes the JSON.

The shards are written from the folder by crema-shards (about 64 MiB each, a `jpg` and a `cls` a
sample) with their index files (DALI's reader needs them). The webdataset library and DALI run
from --peers-python (a virtual environment with both: pip install webdataset nvidia-dali-cuda120).

    run_shards.py [--folder DIR] [--images 3000] [--rounds 3] [--python VENV_PYTHON]
                  [--peers-python PYTHON] [--shards-tool CREMA_SHARDS] [--out FILE]
"""

import argparse
import json
import pathlib
import statistics
import subprocess
import tempfile

from run import REPO, machine, measure, photo_shards

HERE = pathlib.Path(__file__).resolve().parent


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=pathlib.Path)
    parser.add_argument("--images", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--python", default=str(REPO / "build" / "venv" / "bin" / "python"))
    parser.add_argument("--peers-python",
                        default=str(REPO / "build" / "venv-peers" / "bin" / "python"))
    parser.add_argument("--shards-tool",
                        default=str(REPO / "build" / "release" / "examples" / "crema-shards"))
    parser.add_argument("--out", default="benchmarks-python-shards.json")
    args = parser.parse_args()
    folder, shards = photo_shards(tempfile.mkdtemp(prefix="crema-shards-bench-"), args.images,
                                  args.shards_tool, args.folder)
    pattern = str(shards / "shard-*.tar")
    subprocess.run([args.shards_tool, "index", pattern], check=True)
    feed = str(HERE / "feed.py")

    def run(python, loader, root, threads):
        return [python, feed, loader, str(root), "--case", "rrc", "--threads", str(threads)]

    configurations = []
    for threads in (1, 2):
        configurations.append(("crema, shards", threads,
                               run(args.python, "crema", pattern, threads)))
        configurations.append(("crema, folder", threads,
                               run(args.python, "crema", folder, threads)))
        configurations.append(("webdataset + torchvision", threads,
                               run(args.peers_python, "torchvision", pattern, threads)))
        configurations.append(("DALI readers.webdataset", threads,
                               run(args.peers_python, "dali", pattern, threads)))
    results = {}
    with open(args.out, "w") as out:
        for round_number in range(args.rounds):
            for name, threads, command in configurations:
                result = measure(command)
                result.update({"name": name, "threads": threads, "round": round_number,
                               "machine": machine()})
                out.write(json.dumps(result) + "\n")
                results.setdefault((name, threads), []).append(result["samples_per_s"])

    def median(name, threads):
        return statistics.median(results[(name, threads)])

    print(f"machine: {machine()}")
    print(f"RandomResizedCrop(224) + flip + Normalize from {len(list(shards.glob('*.tar')))} "
          f"shards of {folder}, batches of 32, {args.rounds} rounds (medians, range):")
    for name, threads, _ in configurations:
        values = results[(name, threads)]
        print(f"  {name}, {threads} thread(s)/worker(s): {median(name, threads):7.0f} "
              f"samples/s [{min(values):.0f}-{max(values):.0f}]")
    for threads in (1, 2):
        mine = median("crema, shards", threads)
        peers = ", ".join(
            f"{mine / max(median(peer, t) for t in (1, 2)):.1f}x {peer}'s best"
            for peer in ("webdataset + torchvision", "DALI readers.webdataset"))
        print(f"  crema.Loader over shards, {threads} thread(s): "
              f"{mine / median('crema, folder', threads):.2f}x the folder, {peers}")
    print(f"every run: {args.out}")


if __name__ == "__main__":
    main()
