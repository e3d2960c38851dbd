"""Single-process script for test_save.py: ``save OUT`` writes a model;
``crash OUT`` starts saving over it and dies (os._exit) in the middle of
writing, as a killed job would."""
import os
import sys

import torch

import tarantella as tnt

mode, path = sys.argv[1], sys.argv[2]
torch.manual_seed(0 if mode == "save" else 1)
model = tnt.Model(torch.nn.Linear(64, 64))
if mode == "save":
    model.save(path)
else:
    real_save = torch.save

    def dying_save(obj, f, *args, **kwargs):
        real_save(obj, f, *args, **kwargs)
        f.flush()
        os._exit(3)   # written but not yet fsynced/renamed: the "crash"

    torch.save = dying_save
    model.save_weights(path)
