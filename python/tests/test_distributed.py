"""Two ranks under torch.distributed (gloo): shard="auto" splits the data between them, every
rank gets the same number of batches, and the shards are disjoint (dropped) or cover the data
(padded)."""

import json
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
if not torch.distributed.is_available():
    pytest.skip("this PyTorch has no torch.distributed", allow_module_level=True)

RANK = """
import json, sys
import torch
import torch.distributed as dist
import crema
rank, world, store, listing, root, last_batch = sys.argv[1:7]
dist.init_process_group("gloo", init_method="file://" + store, rank=int(rank),
                        world_size=int(world))
loader = crema.Loader(crema.ImageList(listing, root), crema.ImageTransform(
    crop=crema.RandomResizedCrop(32)), 4, threads=1, output="numpy", last_batch=last_batch)
epochs = []
for epoch in range(2):
    seen = [labels.tolist() for _, labels in loader]
    epochs.append(seen)
# The ranks agree on the step count, as DDP needs: an allreduce per batch would hang otherwise.
steps = torch.tensor([len(epochs[0])])
dist.all_reduce(steps)
print(json.dumps({"len": len(loader), "epochs": epochs, "total_steps": int(steps)}))
dist.destroy_process_group()
"""


@pytest.mark.parametrize("last_batch", ["drop", "pad"])
def test_two_ranks_get_equal_batches_of_disjoint_or_covering_shards(photos, tmp_path,
                                                                   last_batch):
    files = sorted(photos.glob("*/*.jpg"))  # 21: one rank has a record more than the other
    listing = tmp_path / "list.txt"
    listing.write_text("".join(f"{path.relative_to(photos)} {i}\n" for i, path in enumerate(files)))
    store = tmp_path / "store"
    ranks = [subprocess.Popen([sys.executable, "-c", RANK, str(rank), "2", str(store),
                               str(listing), str(photos), last_batch],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for rank in range(2)]
    results = []
    for process in ranks:
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert results[0]["len"] == results[1]["len"]
    assert results[0]["total_steps"] == 2 * results[0]["len"]
    for epoch in range(2):
        shards = [[label for batch in result["epochs"][epoch] for label in batch]
                  for result in results]
        assert [len(result["epochs"][epoch]) for result in results] == [results[0]["len"]] * 2
        if last_batch == "drop":
            assert len(shards[0]) == len(shards[1]) == 8  # 10 each, 2 batches of 4
            assert not set(shards[0]) & set(shards[1])
        else:
            assert len(shards[0]) == len(shards[1]) == 12  # 11 each, padded to 3 batches of 4
            assert set(shards[0]) | set(shards[1]) == set(range(21))
