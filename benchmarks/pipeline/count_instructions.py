#!/usr/bin/env python3
"""Instructions per batch that a callgrind profile spent in crema's headers, by header.

  count_instructions.py callgrind.out.PID BATCHES [--json OUT]

Self cost is summed per source line (inlined code counts where it was written) and grouped by
header under include/crema, and moodycamel's queue headers beside them (crema's queues are written
over them: code moved between the two shows as a move, not as a saving). The lines that spin (a loop bounded by time, whose count follows the
schedule) are shown apart, so what is left is comparable between runs and between versions.
"""
import json
import re
import sys
from collections import defaultdict

# Headers whose instructions are waiting: spin loops bounded by time, yields, the idle poll, the
# queues a spin polls. Their counts follow the schedule, not the work.
WAITING = (
    "moodycamel/lightweightsemaphore.h",
    "core/thread_pool.hpp",
    "core/detail/thread_pool_impl.hpp",
    "core/slot_pool.hpp",
    "core/queue_pair.hpp",
    "pipeline/detail/claim_sequencer.hpp",
    "pipeline/detail/warm_refill.hpp",
    "pipeline/detail/release_poller.hpp",
    "pipeline/detail/release_poller_impl.hpp",
    "pipeline/detail/stall_watch.hpp",
)


def parse(path):
    """Self Ir per (file, line) from a callgrind profile (line positions, compressed names)."""
    names = {"fl": {}, "fn": {}}
    cost = defaultdict(int)
    file = fn_file = None
    last = 0
    skip_next = False
    name_re = re.compile(r"^\((\d+)\)(?: (.*))?$")

    def resolve(kind, value):
        match = name_re.match(value)
        if not match:
            return value
        ident, name = match.groups()
        table = names["fl"]
        if name is not None:
            table[ident] = name
        return table.get(ident, "?")

    with open(path, encoding="utf-8", errors="replace") as lines:
        for line in lines:
            line = line.rstrip("\n")
            if not line or line[0] == "#":
                continue
            key, _, value = line.partition("=")
            if key in ("fl", "fi", "fe") and _:
                file = resolve("fl", value)
                if key == "fl":
                    fn_file = file
                continue
            if key == "fn" and _:
                file = fn_file
                continue
            if key in ("cfl", "cfi") and _:
                resolve("fl", value)  # may define a name
                continue
            if key in ("calls",) and _:
                skip_next = True
                continue
            if _ or not (line[0].isdigit() or line[0] in "+-*"):
                continue
            fields = line.split()
            pos = fields[0]
            if pos == "*":
                number = last
            elif pos[0] in "+-":
                number = last + int(pos)
            else:
                number = int(pos)
            last = number
            if skip_next:  # the inclusive cost of a call: counted where it was spent
                skip_next = False
                continue
            if len(fields) > 1:
                cost[(file, number)] += int(fields[1])
    return cost


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    cost = parse(sys.argv[1])
    batches = int(sys.argv[2])
    by_header = defaultdict(int)
    for (file, _), ir in cost.items():
        if file and "include/crema/" in file:
            by_header[file.split("include/crema/", 1)[1]] += ir
        elif file and re.search(r"(concurrentqueue|moodycamel)/[a-z]*\.h$", file):
            by_header["moodycamel/" + file.rsplit("/", 1)[1]] += ir
    work = {h: ir / batches for h, ir in by_header.items() if h not in WAITING}
    waiting = {h: ir / batches for h, ir in by_header.items() if h in WAITING}
    print(f"instructions per batch in crema's headers ({batches} batches)")
    for header, ir in sorted(work.items(), key=lambda item: -item[1]):
        print(f"  {ir:10.0f}  {header}")
    print(f"  {sum(work.values()):10.0f}  work, in all")
    for header, ir in sorted(waiting.items(), key=lambda item: -item[1]):
        print(f"  {ir:10.0f}  {header} (waiting: follows the schedule)")
    if "--json" in sys.argv:
        out = sys.argv[sys.argv.index("--json") + 1]
        with open(out, "w", encoding="utf-8") as stream:
            json.dump({"batches": batches, "work": work, "waiting": waiting}, stream, indent=1)


if __name__ == "__main__":
    main()
