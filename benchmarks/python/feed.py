#!/usr/bin/python3
"""One measurement of benchmarks/python: a loader reads a folder of JPEGs through
RandomResizedCrop(224) + flip + Normalize ("rrc") or Resize(256) + CenterCrop(224) + Normalize
("eval") into batches of 32, as a training loop would, and prints one JSON object: samples per
second over --epochs epochs after a first one (which starts the workers and warms the page
cache), the loop thread's CPU time per batch, and, for crema, what a loop pays for a batch that
is ready (the loop thread's CPU time from one batch in hand to the next: Python and handoff).

    feed.py crema|torchvision|dali|ffcv ROOT --case rrc|eval --threads N [--epochs 2]
            [--batch 32] [--ready]
    feed.py ffcv-write FOLDER --beton FILE

"ffcv" reads ROOT as a .beton that "ffcv-write" wrote from the folder (FFCV's Loader with N
workers, its decoders cropping).

ROOT is a folder, or a pattern of WebDataset tar shards (`.../shard-*.tar`, with DALI's index
files beside them): then "crema" reads crema.WebDataset, "torchvision" the webdataset library's
pipeline with torchvision's transforms, "dali" DALI's readers.webdataset.

"crema" is the package's Loader with N threads; "torchvision" is ImageFolder + DataLoader with
N workers (0: the loop's own thread), one torch thread each, as its users run it; "dali" is
DALI's CPU pipeline with N threads (readers.file, decoders.image_random_crop or decoders.image +
resize, crop_mirror_normalize), its outputs copied into torch tensors as its PyTorch iterator
copies them.
"""

import argparse
import json
import statistics
import time

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


def is_shards(root):
    """Whether ROOT names WebDataset shards (a pattern of .tar files) rather than a folder."""
    return root.endswith(".tar")


def crema_loader(root, case, threads, batch, shard_blocks=None, http_cache=0):
    import crema
    crop = (crema.RandomResizedCrop(224) if case == "rrc"
            else crema.ResizeCenterCrop(256, 224))
    if is_shards(root):
        source = crema.WebDataset(root, shard_blocks=shard_blocks,
                                  http=crema.HTTP(cache_bytes=http_cache << 20))
    else:
        source = crema.ImageFolder(root)
    return crema.Loader(source,
                        crema.ImageTransform(crop=crop, flip=case == "rrc", mean=MEAN, std=STD),
                        batch, threads=threads, seed=1)


def torchvision_steps(case):
    from torchvision import transforms
    if case == "rrc":
        steps = [transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip()]
    else:
        steps = [transforms.Resize(256), transforms.CenterCrop(224)]
    return transforms.Compose(steps + [transforms.ToTensor(), transforms.Normalize(MEAN, STD)])


def torchvision_loader(root, case, workers, batch):
    """torchvision's ImageFolder, or for shards the webdataset library's pipeline (shard
    shuffle, a shuffle buffer of 1,000, PIL decoding), with torchvision's transforms, into a
    DataLoader of `workers` workers, as the webdataset library's users run it."""
    import torch
    from torchvision import datasets
    torch.set_num_threads(1)
    if is_shards(root):
        import glob
        import webdataset as wds
        dataset = (wds.WebDataset(sorted(glob.glob(root)), shardshuffle=100)
                   .shuffle(1000).decode("pil").to_tuple("jpg", "cls")
                   .map_tuple(torchvision_steps(case), int))
        return torch.utils.data.DataLoader(dataset, batch, num_workers=workers,
                                           persistent_workers=workers > 0)
    dataset = datasets.ImageFolder(root, torchvision_steps(case))
    return torch.utils.data.DataLoader(dataset, batch, shuffle=True, num_workers=workers,
                                       persistent_workers=workers > 0)


def dali_loader(root, case, threads, batch):
    from nvidia.dali import fn, pipeline_def, types

    @pipeline_def
    def pipeline():
        if is_shards(root):
            import glob
            paths = sorted(glob.glob(root))
            jpegs, labels = fn.readers.webdataset(
                paths=paths, index_paths=[path + ".idx" for path in paths], ext=["jpg", "cls"],
                random_shuffle=True, name="reader")
        else:
            jpegs, labels = fn.readers.file(file_root=root, random_shuffle=True, name="reader")
        if case == "rrc":
            images = fn.decoders.image_random_crop(jpegs, device="cpu", output_type=types.RGB,
                                                   random_area=[0.08, 1.0],
                                                   random_aspect_ratio=[3 / 4, 4 / 3])
            images = fn.resize(images, resize_x=224, resize_y=224)
            mirror = fn.random.coin_flip()
        else:
            images = fn.decoders.image(jpegs, device="cpu", output_type=types.RGB)
            images = fn.resize(images, resize_shorter=256)
            mirror = 0
        images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW",
                                          crop=(224, 224), mean=[255 * m for m in MEAN],
                                          std=[255 * s for s in STD], mirror=mirror)
        return images, labels

    built = pipeline(batch_size=batch, num_threads=threads, device_id=None, seed=1)
    built.build()
    return _DaliEpochs(built, batch)


def write_beton(folder, beton):
    """FFCV's dataset file of an image folder: each image re-encoded as a JPEG at full size
    (RGBImageField's jpg mode, quality 90), its class an IntField, as FFCV's ImageNet example
    writes them."""
    from ffcv.fields import IntField, RGBImageField
    from ffcv.writer import DatasetWriter
    from torchvision.datasets import ImageFolder
    writer = DatasetWriter(beton, {"image": RGBImageField(write_mode="jpg", jpeg_quality=90),
                                   "label": IntField()}, num_workers=2)
    writer.from_indexed_dataset(ImageFolder(folder))


def ffcv_loader(beton, case, threads, batch):
    """FFCV's Loader over a .beton, as its ImageNet example runs it on the CPU: its decoder
    crops (RandomResizedCropRGBImageDecoder, or CenterCropRGBImageDecoder at 224/256), then flip,
    NormalizeImage to float32 and the NCHW view, `threads` workers, a random order."""
    import numpy
    from ffcv.fields.decoders import (CenterCropRGBImageDecoder, IntDecoder,
                                      RandomResizedCropRGBImageDecoder)
    from ffcv.loader import Loader, OrderOption
    from ffcv.transforms import (NormalizeImage, RandomHorizontalFlip, Squeeze, ToTensor,
                                 ToTorchImage)
    mean = numpy.array(MEAN) * 255
    std = numpy.array(STD) * 255
    if case == "rrc":
        images = [RandomResizedCropRGBImageDecoder((224, 224)), RandomHorizontalFlip()]
    else:
        images = [CenterCropRGBImageDecoder((224, 224), ratio=224 / 256)]
    images += [NormalizeImage(mean, std, numpy.float32), ToTensor(), ToTorchImage()]
    return Loader(beton, batch_size=batch, num_workers=threads, order=OrderOption.RANDOM,
                  os_cache=True, pipelines={"image": images,
                                            "label": [IntDecoder(), ToTensor(), Squeeze()]})


class _DaliEpochs:
    """DALI's pipeline as an iterable of epochs of torch tensors, as its PyTorch iterator hands
    them (copied out of DALI's buffers), whose own code needs a newer PyTorch than Debian's:
    an epoch is the reader's samples in whole batches."""

    def __init__(self, pipeline, batch):
        self.pipeline = pipeline
        self.runs = pipeline.epoch_size("reader") // batch

    def __iter__(self):
        import numpy
        import torch
        for _ in range(self.runs):
            images, labels = self.pipeline.run()
            yield (torch.from_numpy(numpy.array(images.as_tensor())),
                   torch.from_numpy(numpy.array(labels.as_tensor())).reshape(-1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("loader", choices=("crema", "torchvision", "dali", "ffcv",
                                           "ffcv-write"))
    parser.add_argument("root")
    parser.add_argument("--case", choices=("rrc", "eval"))
    parser.add_argument("--threads", type=int)
    parser.add_argument("--beton", help="ffcv-write: the .beton to write")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--ready", action="store_true",
                        help="crema only: measure what a ready batch costs the loop, alone "
                             "(its 16 slots would weigh on the memory of a throughput run)")
    parser.add_argument("--shard-blocks", type=int,
                        help="crema, shards: shuffle shard by shard, this many at a time")
    parser.add_argument("--http-cache", type=int, default=0,
                        help="crema, shards behind URLs: MiB of them kept in memory")
    args = parser.parse_args()
    if args.ready:
        warm, cold = ready_batch_cost(args.root, args.case, args.batch)
        print(json.dumps({"loader": "crema", "case": args.case, "python_us_per_batch": warm,
                          "python_us_first_after_idle": cold}), flush=True)
        return
    if args.loader == "ffcv-write":  # ROOT: the folder; --beton: the file to write
        write_beton(args.root, args.beton)
        return
    make = {"crema": crema_loader, "torchvision": torchvision_loader, "dali": dali_loader,
            "ffcv": ffcv_loader}[args.loader]
    if args.loader == "crema":
        loader = crema_loader(args.root, args.case, args.threads, args.batch, args.shard_blocks,
                              args.http_cache)
    else:
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
