"""Rank script: trains the same small model under several configurations and
writes, per configuration, the final weights, the History and the sharded
evaluate/predict results of this rank to <outdir>/<config>.rank<r>.npz.

Configurations (name: samples, global batch, fusion threshold KiB):
  uneven_t0     203 samples, B=31 (not divisible by 2, 3, 4; last batch 17), threshold 0
  uneven_small  same, threshold 1 KiB (several buckets)
  uneven_large  same, threshold 64 MiB (one bucket)
  tiny_last     66 samples, B=32: the last batch has 2 samples, fewer than 3 or 4 ranks
plus plain-torch references (plain.rank<r>.npz): the serial global batches
trained without tarantella, and tnt_distribute_dataset=False with per-rank
data.
Run it serially (python3 model_equivalence.py OUTDIR) for the reference and
through the launcher for N ranks; test_model.py compares.
"""
import json
import os
import sys

import numpy as np
import torch

import tarantella as tnt

CONFIGS = {
    "uneven_t0": (203, 31, 0),
    "uneven_small": (203, 31, 1),
    "uneven_large": (203, 31, 65536),
    "tiny_last": (66, 32, 1),
}


def make_module():
    torch.manual_seed(1234)
    return torch.nn.Sequential(torch.nn.Linear(12, 48), torch.nn.Tanh(),
                               torch.nn.Linear(48, 24), torch.nn.ReLU(),
                               torch.nn.Linear(24, 4))


def plain_torch_training(x, y, batches_per_epoch, epochs):
    """The serial reference without tarantella's training code: a plain
    torch loop over the given global batches (lists of sample indices)."""
    module = make_module()
    opt = torch.optim.SGD(module.parameters(), lr=0.2, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    for epoch in range(epochs):
        for idx in batches_per_epoch(epoch):
            idx = torch.as_tensor(idx, dtype=torch.int64)
            opt.zero_grad()
            loss_fn(module(xt[idx]), yt[idx]).backward()
            opt.step()
    return np.concatenate([w.detach().numpy().ravel() for w in module.state_dict().values()])


def main(outdir):
    rank = tnt.get_rank()
    rng = np.random.RandomState(7)
    x_all = rng.randn(203, 12).astype(np.float32)
    y_all = rng.randint(0, 4, size=203).astype(np.int64)
    for name, (n, batch, threshold_kb) in CONFIGS.items():
        x, y = x_all[:n], y_all[:n]
        model = tnt.Model(make_module())
        model.compile(optimizer=torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9),
                      loss="sparse_categorical_crossentropy", metrics=["accuracy"],
                      tnt_fusion_threshold_kb=threshold_kb)
        history = model.fit(x, y, batch_size=batch, epochs=3, shuffle_seed=11, verbose=0)
        weights = np.concatenate([w.ravel() for w in model.get_weights()])
        loss, acc = model.evaluate(x, y, batch_size=batch, verbose=0)
        pred = model.predict(x, batch_size=batch)
        np.savez(os.path.join(outdir, "%s.rank%d.npz" % (name, rank)),
                 weights=weights, history=json.dumps(history.history),
                 evaluate=np.array([loss, acc]), predict=pred)
    # The global batches a serial run visits (tnt.data's sampler as one
    # rank), trained by plain torch: tnt.Model on N ranks must match it.
    n, batch = 203, 31

    def serial_batches(epoch):
        sampler = tnt.data.DistributedSampler(n, batch, shuffle=True, seed=11, rank=0, size=1)
        sampler.set_epoch(epoch)
        return list(sampler)

    torch_ref = plain_torch_training(x_all[:n], y_all[:n], serial_batches, 3)

    # Each rank brings its own data (tnt_distribute_dataset=False): rank r
    # holds samples r, r+N, r+2N, ... of the first 100, batch_size is the
    # per-rank micro-batch, and ranks run out of data at different steps.
    size = tnt.get_size()
    mine = np.arange(rank, 100, size)
    model = tnt.Model(make_module())
    model.compile(optimizer=torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9),
                  loss="sparse_categorical_crossentropy")
    model.fit(x_all[mine], y_all[mine], batch_size=7, epochs=2, shuffle=False, verbose=0,
              tnt_distribute_dataset=False)
    own = np.concatenate([w.ravel() for w in model.get_weights()])

    def own_batches(epoch):
        shards = [np.arange(r, 100, size) for r in range(size)]
        steps = max(-(-len(s) // 7) for s in shards)
        return [np.concatenate([s[k * 7:(k + 1) * 7] for s in shards]) for k in range(steps)]

    own_ref = plain_torch_training(x_all, y_all, own_batches, 2)
    np.savez(os.path.join(outdir, "plain.rank%d.npz" % rank), torch_ref=torch_ref,
             own=own, own_ref=own_ref)

    # Evaluate exactness on fixed weights (no training), 203 samples and a
    # batch that does not divide them: sharded sums must give the serial
    # accuracy exactly.
    model = tnt.Model(make_module())
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy",
                  metrics=["accuracy", "sparse_categorical_accuracy"])
    result = model.evaluate(x_all, y_all, batch_size=29, verbose=0, return_dict=True)
    np.savez(os.path.join(outdir, "fixed.rank%d.npz" % rank),
             evaluate=json.dumps(result), predict=model.predict(x_all, batch_size=29),
             master_only=np.array([model.predict(x_all, batch_size=29,
                                                 tnt_predict_on_all_ranks=False) is None]))


if __name__ == "__main__":
    main(sys.argv[1])
