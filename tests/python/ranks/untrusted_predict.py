"""Rank program of test_untrusted.py: predict's output description crosses
the ranks as plain data, and a hostile description (a pickle whose
__reduce__ would create a marker file) is refused on every rank without
running it.

usage: untrusted_predict.py OUT_DIR; writes OUT_DIR/predict.rank<r>.json.
"""
import json
import os
import pickle
import sys

import numpy as np
import torch

import tarantella as tnt
import tarantella.model as tnt_model

out = sys.argv[1]
rank = tnt.get_rank()


class TwoHeads(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 2)

    def forward(self, x):
        return self.lin(x), x[:, :1] > 0


torch.manual_seed(0)
model = tnt.Model(TwoHeads())
# One sample on two ranks: rank 1's shard is empty, so it builds its empty
# columns from the master's description of shapes and dtypes.
x = np.arange(3, dtype=np.float32).reshape(1, 3) + 1
a, b = model.predict(x, batch_size=2)
res = {"shapes": [list(a.shape), list(b.shape)], "dtypes": [a.dtype.str, b.dtype.str],
       "values": a.tolist()}


class Payload:
    def __reduce__(self):
        return (open, (os.path.join(out, "marker.rank%d" % rank), "w"))


# The master sends a pickle instead of the description.
honest = tnt_model._broadcast_bytes
tnt_model._broadcast_bytes = lambda data: honest(pickle.dumps([Payload()]) if rank == 0
                                                 else data)
try:
    model.predict(x, batch_size=2)
    res["hostile"] = "accepted"
except tnt.TarantellaError as e:
    res["hostile"] = str(e)
finally:
    tnt_model._broadcast_bytes = honest

with open(os.path.join(out, "predict.rank%d.json" % rank), "w") as f:
    json.dump(res, f)
