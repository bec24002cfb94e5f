"""examples/python/train.py: a PyTorch training loop on the demo's shapes as JPEGs reaches the
demo's accuracy bar fed by crema, and ends within two points of the same loop fed by
torchvision's DataLoader (same model, seed and augmentations)."""

import json
import subprocess
import sys

import pytest

from conftest import REPO

EXAMPLES = REPO / "examples" / "python"


def test_train_py_reaches_the_demo_s_bar_with_crema_and_agrees_with_torchvision(
        tmp_path_factory):
    pytest.importorskip("torch")
    pytest.importorskip("torchvision")
    data = tmp_path_factory.mktemp("shapes")
    subprocess.run([sys.executable, str(EXAMPLES / "make_shapes.py"), str(data)], check=True)
    accuracy = {}
    for loader in ("crema", "torchvision"):
        done = subprocess.run([sys.executable, str(EXAMPLES / "train.py"), "--data", str(data),
                               "--loader", loader, "--json"],
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout.strip().splitlines()[-1])
        accuracy[loader] = report["test_accuracy"]
    assert accuracy["crema"] >= 0.90, accuracy
    assert abs(accuracy["crema"] - accuracy["torchvision"]) <= 0.02, accuracy


def test_the_readme_s_python_quick_start_runs(photos):
    pytest.importorskip("torch")
    done = subprocess.run([sys.executable, str(EXAMPLES / "quick_start.py"), str(photos)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "trained 2 epochs of 3 batches" in done.stdout
