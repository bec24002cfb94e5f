# crema's data layer feeding a PyTorch loop: a folder of JPEGs (one folder per class), each
# sample's crop decoded, augmented and batched on crema's threads while the loop trains.
#   python quick_start.py ROOT
import sys

import crema

loader = crema.Loader(
    crema.ImageFolder(sys.argv[1]),  # ROOT/CLASS/FILE, labelled as torchvision labels it
    crema.ImageTransform(crop=crema.RandomResizedCrop(224), flip=True,
                         mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225)),
    batch_size=8, threads=2, seed=42)
for epoch in range(2):
    for images, labels in loader:  # one epoch; the tensors are views of crema's batch slot
        pass  # train_step(images, labels): float32 [8, 3, 224, 224], int64 [8]
print(f"trained 2 epochs of {len(loader)} batches; the loader {loader.stats()}")
