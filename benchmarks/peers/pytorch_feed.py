#!/usr/bin/python3
"""The PyTorch peer of crema-feed: a Caffe LMDB read through torch.utils.data.DataLoader the way
its users write it. A map-style Dataset opens the LMDB in each worker, parses each Datum with the
module protoc generates from datum.proto, crops and mirrors at random with numpy, subtracts the
per-channel mean and scales; the default collate makes the batches. Prints one JSON object per
worker count: the median over --epochs shuffled epochs (3 by default) of samples per second, after
the workers have started."""

import argparse
import json
import statistics
import sys
import time

import lmdb
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset


class CaffeLMDB(Dataset):
    def __init__(self, path, crop, mean, scale, datum_module):
        self.path = path
        self.crop = crop
        self.mean = np.asarray(mean, dtype=np.float32).reshape(-1, 1, 1)
        self.scale = np.float32(scale)
        self.datum_module = datum_module
        self.env = None
        env = lmdb.open(path, readonly=True, lock=False)
        with env.begin() as txn:
            self.keys = [key for key, _ in txn.cursor()]
        env.close()

    def __len__(self):
        return len(self.keys)

    def __getitem__(self, index):
        if self.env is None:  # one environment per worker process
            self.env = lmdb.open(self.path, readonly=True, lock=False, readahead=False,
                                 meminit=False)
            self.txn = self.env.begin()
        datum = self.datum_module.Datum()
        datum.ParseFromString(self.txn.get(self.keys[index]))
        image = np.frombuffer(datum.data, dtype=np.uint8).reshape(
            datum.channels, datum.height, datum.width)
        y = np.random.randint(0, datum.height - self.crop + 1)
        x = np.random.randint(0, datum.width - self.crop + 1)
        image = image[:, y:y + self.crop, x:x + self.crop]
        if np.random.rand() < 0.5:
            image = image[:, :, ::-1]
        values = (image.astype(np.float32) - self.mean) * self.scale
        return torch.from_numpy(np.ascontiguousarray(values)), datum.label


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("db")
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--crop", type=int, required=True)
    parser.add_argument("--mean-values", default="104,117,123")
    parser.add_argument("--scale", type=float, default=0.017)
    parser.add_argument("--workers", default="0,1,2")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--proto-module-dir", required=True)
    args = parser.parse_args()
    sys.path.insert(0, args.proto_module_dir)
    import datum_pb2

    torch.set_num_threads(1)
    mean = [float(v) for v in args.mean_values.split(",")]
    dataset = CaffeLMDB(args.db, args.crop, mean, args.scale, datum_pb2)
    for workers in [int(w) for w in args.workers.split(",")]:
        loader = DataLoader(dataset, batch_size=args.batch, shuffle=True, num_workers=workers,
                            persistent_workers=workers > 0)
        for _ in loader:  # a first epoch starts the workers and warms the page cache
            break
        rates = []
        for _ in range(args.epochs):
            samples = 0
            start = time.perf_counter()
            for data, labels in loader:
                samples += data.shape[0]
            rates.append(samples / (time.perf_counter() - start))
        print(json.dumps({"peer": "pytorch", "torch": torch.__version__, "workers": workers,
                          "epochs": args.epochs, "samples_per_s": statistics.median(rates),
                          "all_samples_per_s": rates}), flush=True)


if __name__ == "__main__":
    main()
