#!/usr/bin/python3
"""One measurement of benchmarks/python: a loader reads a folder of JPEGs through
RandomResizedCrop(224) + flip + Normalize ("rrc") or Resize(256) + CenterCrop(224) + Normalize
("eval") into batches of 32, as a training loop would, and prints one JSON object: samples per
second over --epochs epochs after a first one (which starts the workers and warms the page
cache), the loop thread's CPU time per batch, and, for crema, what a loop pays for a batch that
is ready (the loop thread's CPU time from one batch in hand to the next: Python and handoff).

    feed.py crema|torchvision ROOT --case rrc|eval --threads N [--epochs 2] [--batch 32] [--ready]

"crema" is the package's Loader with N threads; "torchvision" is ImageFolder + DataLoader with
N workers (0: the loop's own thread), one torch thread each, as its users run it.
"""

import argparse
import json
import statistics
import time

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


def crema_loader(root, case, threads, batch):
    import crema
    crop = (crema.RandomResizedCrop(224) if case == "rrc"
            else crema.ResizeCenterCrop(256, 224))
    return crema.Loader(crema.ImageFolder(root),
                        crema.ImageTransform(crop=crop, flip=case == "rrc", mean=MEAN, std=STD),
                        batch, threads=threads, seed=1)


def torchvision_loader(root, case, workers, batch):
    import torch
    from torchvision import datasets, transforms
    torch.set_num_threads(1)
    normalize = transforms.Normalize(MEAN, STD)
    if case == "rrc":
        steps = [transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip()]
    else:
        steps = [transforms.Resize(256), transforms.CenterCrop(224)]
    dataset = datasets.ImageFolder(root, transforms.Compose(steps + [transforms.ToTensor(),
                                                                     normalize]))
    return torch.utils.data.DataLoader(dataset, batch, shuffle=True, num_workers=workers,
                                       persistent_workers=workers > 0)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("loader", choices=("crema", "torchvision"))
    parser.add_argument("root")
    parser.add_argument("--case", choices=("rrc", "eval"), required=True)
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--ready", action="store_true",
                        help="crema only: measure what a ready batch costs the loop, alone "
                             "(its 16 slots would weigh on the memory of a throughput run)")
    args = parser.parse_args()
    if args.ready:
        warm, cold = ready_batch_cost(args.root, args.case, args.batch)
        print(json.dumps({"loader": "crema", "case": args.case, "python_us_per_batch": warm,
                          "python_us_first_after_idle": cold}), flush=True)
        return
    make = crema_loader if args.loader == "crema" else torchvision_loader
    loader = make(args.root, args.case, args.threads, args.batch)
    samples = batches = 0
    seconds = cpu = 0.0
    for epoch in range(args.epochs + 1):
        start = time.perf_counter()
        start_cpu = time.thread_time()
        count = 0
        for images, labels in loader:
            count += len(labels)
            if epoch > 0:
                batches += 1
        if epoch > 0:
            seconds += time.perf_counter() - start
            cpu += time.thread_time() - start_cpu
            samples += count
    result = {"loader": args.loader, "case": args.case, "threads": args.threads,
              "samples_per_s": samples / seconds, "loop_cpu_us_per_batch": 1e6 * cpu / batches,
              "batches": batches}
    print(json.dumps(result), flush=True)


def ready_batch_cost(root, case, batch, slots=16, bursts=3):
    """What a loop pays for a batch that is ready: the producers fill every slot while the loop
    sleeps, then the loop takes the batches one after the other (each released before the
    next), every one of them ready. A batch's cost is the CPU time of the loop's thread from
    one batch in hand to the next (so producers running on the other cores do not count).
    Returns the median over every batch of the bursts, and the median of each burst's first
    batch (caches cold after the sleep, as after a training step), in microseconds."""
    import crema
    crop = (crema.RandomResizedCrop(224) if case == "rrc"
            else crema.ResizeCenterCrop(256, 224))
    loader = crema.Loader(crema.ImageFolder(root),
                          crema.ImageTransform(crop=crop, flip=case == "rrc", mean=MEAN,
                                               std=STD),
                          batch, threads=2, seed=1, prefetch=slots)
    costs, firsts = [], []
    iterator = iter(loader)
    next(iterator)  # starts the threads
    fill = 1.0 + slots * batch / 200  # seconds to fill every slot, even on a slow machine
    for _ in range(bursts):
        # Every slot refilled, then an untimed pull: where the last burst ended an epoch, the
        # next one starts here, outside the timed batches.
        time.sleep(fill)
        if next(iterator, None) is None:
            iterator = iter(loader)
            next(iterator)
        time.sleep(fill)
        burst = []
        before = time.thread_time()
        for images, labels in iterator:
            now = time.thread_time()
            burst.append(now - before)
            before = now
            if len(burst) == slots - 2:
                break
        if burst:
            firsts.append(burst[0])
            costs.extend(burst)
        if len(burst) < slots - 2:
            iterator = iter(loader)
    loader.close()
    return 1e6 * statistics.median(costs), 1e6 * statistics.median(firsts)


if __name__ == "__main__":
    main()
