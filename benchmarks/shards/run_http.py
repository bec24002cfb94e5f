#!/usr/bin/python3
"""WebDataset shards read over HTTP against the same shards read as files: crema-feed and the
Python package's crema.Loader through RandomResizedCrop(224) + flip + Normalize into float batches
of 32, on 1 and 2 threads, and crema-feed's source alone (every sample read on one thread,
nothing decoded) beside a sequential read of the shards in 1 MiB blocks. The server is
crema-http-serve (the HTTP tests' server: byte ranges, kept connections) on 127.0.0.1, on the
same cores as the reader, as a cache or proxy beside a training job would be. Each run a
process of its own, in interleaved rounds; prints the medians and ratios with the machine,
writes JSON lines.

Two ways to read: "sample" shuffles any sample after any other and asks the server for each
sample (a request a sample); "block" shuffles shard by shard (--shard-blocks 1) and keeps
--cache MiB of shards in memory, in chunks of 8 MiB (a request a chunk). Files are read in the
same order as the URLs in each.

    run_http.py [--folder DIR] [--images 3000] [--rounds 3] [--build build/release]
                [--python VENV_PYTHON] [--cache 80] [--out FILE]
"""

import argparse
import json
import pathlib
import statistics
import subprocess
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks" / "python"))
from run import machine, measure, photo_shards  # noqa: E402  (the Python benchmarks' helpers)

NORMALIZE = "0.485,0.456,0.406/0.229,0.224,0.225"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=pathlib.Path)
    parser.add_argument("--images", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--build", type=pathlib.Path, default=REPO / "build" / "release")
    parser.add_argument("--python", default=str(REPO / "build" / "venv" / "bin" / "python"))
    parser.add_argument("--cache", type=int, default=80,
                        help="MiB of shards the block mode keeps: more than a shard, less "
                             "than the data")
    parser.add_argument("--out", default="benchmarks-shards-http.json")
    args = parser.parse_args()
    _, shards = photo_shards(tempfile.mkdtemp(prefix="crema-http-bench-"), args.images,
                             args.build / "examples" / "crema-shards", args.folder)
    names = sorted(path.name for path in shards.glob("shard-*.tar"))
    braces = f"shard-{{{names[0][6:12]}..{names[-1][6:12]}}}.tar"
    server = subprocess.Popen([str(args.build / "benchmarks" / "crema-http-serve"), str(shards)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    base = server.stdout.readline().strip()
    where = {"files": str(shards / braces), "http": base + braces}
    feed_tool = str(args.build / "examples" / "crema-feed")
    feed_py = str(REPO / "benchmarks" / "python" / "feed.py")

    def feed(pattern, threads, mode):
        blocks = ["--shard-blocks", "1", "--http-cache", str(args.cache)] if mode == "block" else []
        return [feed_tool, "--shards", pattern, "--batch", "32", "--random-resized-crop", "224",
                "--mirror", "--normalize", NORMALIZE, "--producers", str(threads), "--threads",
                str(threads), "--epochs", "2", "--json"] + blocks

    def loader(pattern, threads, mode):
        blocks = ["--shard-blocks", "1", "--http-cache", str(args.cache)] if mode == "block" else []
        return [args.python, feed_py, "crema", pattern, "--case", "rrc", "--threads",
                str(threads)] + blocks

    configurations = [(tool, mode, kind, threads, make(where[kind], threads, mode))
                      for mode in ("sample", "block")
                      for threads in (1, 2)
                      for tool, make in (("crema-feed", feed), ("crema.Loader", loader))
                      for kind in ("files", "http")]
    results = {}
    try:
        with open(args.out, "w") as out:
            for round_number in range(args.rounds):
                for tool, mode, kind, threads, command in configurations:
                    result = measure(command)
                    result.update({"tool": tool, "mode": mode, "read": kind, "threads": threads,
                                   "round": round_number, "machine": machine(),
                                   "shards": len(names), "cache_mib": args.cache})
                    out.write(json.dumps(result) + "\n")
                    results.setdefault((tool, mode, kind, threads), []).append(result)
    finally:
        server.stdin.close()
        server.wait()

    def median(tool, mode, kind, threads, field="samples_per_s"):
        return statistics.median(r[field] for r in results[(tool, mode, kind, threads)])

    print(f"machine: {machine()}")
    print(f"{len(names)} shards of {args.images} photographs; medians of {args.rounds} rounds; "
          f"block: a shard a block, a cache of {args.cache} MiB")
    print(f"{'':14} {'order':>6} {'threads':>7} {'files':>9} {'http':>9} {'http / files':>13}")
    for mode in ("sample", "block"):
        for tool in ("crema-feed", "crema.Loader"):
            for threads in (1, 2):
                files = median(tool, mode, "files", threads)
                http = median(tool, mode, "http", threads)
                print(f"{tool:14} {mode:>6} {threads:>7} {files:>9.0f} {http:>9.0f} "
                      f"{http / files:>13.3f}")
    for mode in ("sample", "block"):
        for kind in ("files", "http"):
            source = median("crema-feed", mode, kind, 1, "source_samples_per_s")
            sequential = median("crema-feed", mode, kind, 1, "raw_read_bytes_per_s")
            print(f"source alone, {mode} order, over {kind}: {source:.0f} samples/s; "
                  f"sequential 1 MiB reads {sequential / 1e6:.0f} MB/s")
    print(f"written: {args.out}")


if __name__ == "__main__":
    main()
