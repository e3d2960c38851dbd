"""tnt.Model.fit(tnt_seed_per_rank=s) against torch.manual_seed(s).

``porting_fit_seed.py option|manual``: trains a small model whose forward
draws from torch's generator (as dropout does) and prints, per rank, a digest
of its draws and of the final weights (all printed by the master). ``option`` passes
tnt_seed_per_rank=5 to fit; ``manual`` calls torch.manual_seed(5) first."""
import hashlib
import sys

import numpy as np
import torch

import tarantella as tnt


class Noisy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)
        self.draws = []

    def forward(self, x):
        if self.training:
            self.draws.append(torch.rand(4).numpy().copy())  # what dropout would draw
        return self.fc(x)


def digest(arrays):
    return hashlib.sha256(b"".join(np.ascontiguousarray(a).tobytes() for a in arrays)).hexdigest()[:16]


mode = sys.argv[1]
g = torch.Generator().manual_seed(1)
x, y = torch.randn(40, 4, generator=g), torch.randint(0, 3, (40,), generator=g)
torch.manual_seed(0)
model = tnt.Model(Noisy())
model.compile(torch.optim.SGD(model.parameters(), lr=0.1),
              loss="sparse_categorical_crossentropy")
if mode == "manual":
    torch.manual_seed(5)
    model.fit(x, y, batch_size=8, epochs=2, verbose=0)
else:
    model.fit(x, y, batch_size=8, epochs=2, verbose=0, tnt_seed_per_rank=5)
# The master prints every rank's line (lines of several ranks may interleave).
mine = "rank %d draws %s weights %s" % (tnt.get_rank(), digest(model.module.draws),
                                        digest([p.detach().numpy() for p in model.parameters()]))
lines = tnt.allgather_object(mine)
if tnt.is_master_rank():
    print("\n".join(lines), flush=True)
