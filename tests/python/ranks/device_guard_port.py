"""A rank that picks its GPU the way a literal port of Horovod's
torch.cuda.set_device(hvd.local_rank()) does, against a CUDA TEST DOUBLE:
this machine has no GPU, so torch.cuda is made to look like the launcher's
one-GPU-per-rank view (device_count() == 1) and torch's device switch is
replaced by one that fails as the CUDA runtime does ("invalid device
ordinal") for an index it cannot see. Nothing here ran on a GPU.

argv[1]: "literal" (set_device(tnt.get_local_rank())) or "fixed"
(set_device(tnt.cuda.local_device())). argv[2]: "tnt-first" (tarantella is
imported before torch: the guard comes from the import hook) or
"torch-first".
"""
import sys

mode, order = sys.argv[1], sys.argv[2]
if order == "tnt-first":
    import tarantella as tnt
    import torch
else:
    import torch
    import tarantella as tnt

VISIBLE = 1  # what CUDA_VISIBLE_DEVICES=<one GPU> leaves each rank


def double_set_device(index):
    # The CUDA runtime's answer to an index it does not have.
    if index >= VISIBLE:
        raise RuntimeError("CUDA error: invalid device ordinal")
    print("rank %d set device %d" % (tnt.get_rank(), index), flush=True)


torch.cuda.device_count = lambda: VISIBLE
torch._C._cuda_setDevice = double_set_device

if mode == "literal":
    torch.cuda.set_device(tnt.get_local_rank())
else:
    torch.cuda.set_device(tnt.cuda.local_device())
tnt.barrier()
