#!/usr/bin/env python3
"""Trains a small CNN with PyTorch on a folder of JPEGs (the demo's ten shapes, written by
make_shapes.py when the folder is missing), fed by crema.Loader or by torchvision's DataLoader:
the same model, seed and augmentations either way, so the two can be compared.

    train.py [--data DIR] [--loader crema|torchvision] [--epochs 3] [--batch 64] [--threads 2]

Prints the loss and the samples per second of each epoch, then the test accuracy; --json prints
one JSON object instead.
"""

import argparse
import json
import pathlib
import subprocess
import sys
import tempfile
import time

import torch
from torch import nn

MEAN = (0.5, 0.5, 0.5)
STD = (0.25, 0.25, 0.25)
SCALE = (0.6, 1.0)  # RandomResizedCrop's share of the image: the shapes stay in the crop


def model():
    """Two strided convolutions and a linear layer: 32 x 32 x 3 -> 16 x 16 x 16 -> 8 x 8 x 32
    -> 10 class scores."""
    return nn.Sequential(
        nn.Conv2d(3, 16, 5, stride=2, padding=2), nn.ReLU(),
        nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
        nn.Flatten(), nn.Linear(32 * 8 * 8, 10))


def crema_loaders(data, batch, threads, seed):
    import crema
    train = crema.Loader(
        crema.ImageFolder(data / "train"),
        crema.ImageTransform(crop=crema.RandomResizedCrop(32, scale=SCALE), flip=True,
                             mean=MEAN, std=STD),
        batch, threads=threads, seed=seed, last_batch="drop")
    test = crema.Loader(
        crema.ImageFolder(data / "test"),
        crema.ImageTransform(crop=crema.ResizeCenterCrop(32, 32), mean=MEAN, std=STD),
        256, threads=threads, shuffle=False)
    return train, test


def torchvision_loaders(data, batch, threads, seed):
    from torchvision import datasets, transforms
    normalize = transforms.Normalize(MEAN, STD)
    train_set = datasets.ImageFolder(data / "train", transforms.Compose([
        transforms.RandomResizedCrop(32, scale=SCALE), transforms.RandomHorizontalFlip(),
        transforms.ToTensor(), normalize]))
    test_set = datasets.ImageFolder(data / "test", transforms.Compose([
        transforms.Resize(32), transforms.CenterCrop(32), transforms.ToTensor(), normalize]))
    generator = torch.Generator().manual_seed(seed)
    train = torch.utils.data.DataLoader(train_set, batch, shuffle=True, num_workers=threads,
                                        drop_last=True, generator=generator,
                                        persistent_workers=threads > 0)
    test = torch.utils.data.DataLoader(test_set, 256, num_workers=threads)
    return train, test


def accuracy(net, loader):
    net.eval()
    right = total = 0
    with torch.no_grad():
        for images, labels in loader:
            right += int((net(images).argmax(1) == labels).sum())
            total += len(labels)
    net.train()
    return right / total


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=pathlib.Path)
    parser.add_argument("--loader", choices=("crema", "torchvision"), default="crema")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    data = args.data or pathlib.Path(tempfile.gettempdir()) / "crema-shapes"
    if not (data / "train").is_dir():
        maker = pathlib.Path(__file__).with_name("make_shapes.py")
        subprocess.run([sys.executable, str(maker), str(data)], check=True)
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    make = crema_loaders if args.loader == "crema" else torchvision_loaders
    train, test = make(data, args.batch, args.threads, args.seed)
    net = model()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.02, momentum=0.9)
    loss_of = nn.CrossEntropyLoss()
    report = {"loader": args.loader, "epochs": []}
    started = time.perf_counter()
    for epoch in range(args.epochs):
        begun = time.perf_counter()
        total = samples = 0.0
        for images, labels in train:
            optimizer.zero_grad()
            loss = loss_of(net(images), labels)
            loss.backward()
            optimizer.step()
            total += float(loss) * len(labels)
            samples += len(labels)
        seconds = time.perf_counter() - begun
        report["epochs"].append({"loss": total / samples, "samples_per_s": samples / seconds})
        if not args.json:
            print(f"epoch {epoch}: loss {total / samples:.3f}, {samples / seconds:.0f} samples/s "
                  f"({args.loader})", flush=True)
    report["train_seconds"] = time.perf_counter() - started
    report["test_accuracy"] = accuracy(net, test)
    if args.json:
        print(json.dumps(report))
    else:
        print(f"trained in {report['train_seconds']:.1f} s; test accuracy "
              f"{report['test_accuracy']:.3f}")


if __name__ == "__main__":
    main()
