#!/usr/bin/env python3
"""Data-parallel training of a small CNN on scikit-learn's digits.

    build/bin/tarantella -n 2 -- python/examples/digits.py

The 8x8 handwritten digits ship with scikit-learn (no download). Every rank
loads the whole dataset; tnt.Model gives each rank its share of every global
batch of 64 samples, reduces the gradients, and prints progress on the master
rank only. The same script runs unchanged as a single process
(``python3 python/examples/digits.py``) and reaches the same accuracy.

With ``--backup-dir DIR`` it is preemptible (tnt.callbacks.BackupAndRestore):
SIGUSR1 or SIGTERM makes it back up and exit with status 75, and running it
again resumes where it stopped (sbatch-templates/preemptible.sbatch).
``--compression bf16`` (or fp16) sends the gradients as 16-bit values.
"""
import argparse
import sys

import numpy as np
import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

import tarantella as tnt


class DigitsCNN(torch.nn.Module):
    """Two 3x3 convolutions and a small classifier: about 14k parameters."""

    def __init__(self, num_classes=10):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(1, 16, kernel_size=3, padding=1), torch.nn.ReLU(),
            torch.nn.MaxPool2d(2),                                     # 8x8 -> 4x4
            torch.nn.Conv2d(16, 32, kernel_size=3, padding=1), torch.nn.ReLU(),
            torch.nn.MaxPool2d(2))                                     # 4x4 -> 2x2
        self.classifier = torch.nn.Sequential(
            torch.nn.Flatten(), torch.nn.Linear(32 * 2 * 2, 64), torch.nn.ReLU(),
            torch.nn.Linear(64, num_classes))

    def forward(self, x):
        return self.classifier(self.features(x))


def load_data(seed):
    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[:, None, :, :]    # N x 1 x 8 x 8 in [0, 1]
    y = digits.target.astype(np.int64)
    return train_test_split(x, y, test_size=0.2, random_state=seed, stratify=y)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--batch-size", type=int, default=64, help="global batch size")
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--verbose", type=int, default=1, choices=(0, 1, 2))
    parser.add_argument("--backup-dir", help="back up to DIR every --backup-freq and on "
                        "SIGUSR1/SIGTERM; resume from it when it holds a backup")
    parser.add_argument("--backup-freq", default="epoch", help="'epoch' or a number of steps")
    parser.add_argument("--save-weights", metavar="PATH", help="save the final weights to PATH")
    parser.add_argument("--compression", choices=("bf16", "fp16"),
                        help="send the gradients as 16-bit values (compile(compression=...))")
    args = parser.parse_args()

    torch.manual_seed(args.seed)          # the master's initial weights are broadcast
    x_train, x_test, y_train, y_test = load_data(args.seed)

    model = tnt.Model(DigitsCNN())
    model.compile(optimizer=torch.optim.Adam(model.parameters(), lr=args.lr),
                  loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"], compression=args.compression)

    size = tnt.get_size()
    lo, hi = args.batch_size // size, -(-args.batch_size // size)
    if tnt.is_master_rank():
        print("Tarantella %s: %d rank%s, global batch %d = %s samples per rank"
              % (tnt.__version__, size, "" if size == 1 else "s", args.batch_size,
                 lo if lo == hi else "%d-%d" % (lo, hi)))
        print("digits: %d training and %d test images of 8x8 pixels, 10 classes\n"
              % (len(x_train), len(x_test)))
    model.summary()

    callbacks = []
    if args.backup_dir:
        freq = args.backup_freq if args.backup_freq == "epoch" else int(args.backup_freq)
        callbacks.append(tnt.callbacks.BackupAndRestore(args.backup_dir, save_freq=freq))
    model.fit(x_train, y_train, batch_size=args.batch_size, epochs=args.epochs,
              validation_data=(x_test, y_test), shuffle_seed=args.seed, verbose=args.verbose,
              callbacks=callbacks)
    if args.save_weights:
        model.save_weights(args.save_weights)

    loss, accuracy = model.evaluate(x_test, y_test, batch_size=args.batch_size, verbose=0)
    if tnt.is_master_rank():
        correct = int(round(accuracy * len(y_test)))
        print("\nTest accuracy: %.2f%% (%d/%d images), test loss %.4f"
              % (100 * accuracy, correct, len(y_test), loss))
    return 0 if accuracy >= 0.95 else 1


if __name__ == "__main__":
    sys.exit(main())
