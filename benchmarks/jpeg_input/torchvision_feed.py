#!/usr/bin/python3
"""The torchvision peer of `crema-feed --images`: an ImageFolder read through
torch.utils.data.DataLoader with the transforms its users write: RandomResizedCrop(S),
RandomHorizontalFlip, ToTensor, Normalize (training), or Resize(R), CenterCrop(C), ToTensor,
Normalize (evaluation). Prints one JSON object per worker count: the median over --epochs
shuffled epochs (3 by default) of samples per second, after the workers have started."""

import argparse
import json
import statistics
import time

import torch
from torch.utils.data import DataLoader
from torchvision import datasets, transforms


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("root")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--random-resized-crop", type=int)
    parser.add_argument("--resize", type=int)
    parser.add_argument("--center-crop", type=int)
    parser.add_argument("--workers", default="0,1,2")
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()
    normalize = transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
    if args.random_resized_crop:
        transform = transforms.Compose([transforms.RandomResizedCrop(args.random_resized_crop),
                                        transforms.RandomHorizontalFlip(), transforms.ToTensor(),
                                        normalize])
        name = "RandomResizedCrop(%d)" % args.random_resized_crop
    else:
        transform = transforms.Compose([transforms.Resize(args.resize),
                                        transforms.CenterCrop(args.center_crop),
                                        transforms.ToTensor(), normalize])
        name = "Resize(%d) + CenterCrop(%d)" % (args.resize, args.center_crop)
    dataset = datasets.ImageFolder(args.root, transform=transform)
    torch.set_num_threads(1)
    for workers in [int(w) for w in args.workers.split(",")]:
        loader = DataLoader(dataset, batch_size=args.batch, shuffle=True, num_workers=workers,
                            persistent_workers=workers > 0)
        rates = []
        for epoch in range(args.epochs + 1):
            start = time.perf_counter()
            samples = 0
            for images, labels in loader:
                samples += images.shape[0]
            if epoch > 0:  # the first epoch starts the workers
                rates.append(samples / (time.perf_counter() - start))
        print(json.dumps({"peer": "torchvision", "transform": name, "workers": workers,
                          "samples_per_s": statistics.median(rates), "images": len(dataset),
                          "batch": args.batch, "torch": torch.__version__}), flush=True)


if __name__ == "__main__":
    main()
