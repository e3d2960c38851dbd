"""Rank script: gradient clipping after the allreduce.

Every configuration trains the same model on the same global batches and is
compared with plain serial torch (no tarantella training code) that clips
the full-batch gradient the same way:

  compile_clipnorm   tnt.Model, compile(clipnorm=0.05)
  compile_clipvalue  tnt.Model, compile(clipvalue=0.002)
  loop_clipnorm      DistributedOptimizer: backward, synchronize(),
                     clip_grad_norm_, `with skip_synchronize(): step()`
  loop_resync        the same, but step() without skip_synchronize(): a
                     warning, and still no second reduction
The custom loops count the gradients handed to the reducer: one per
parameter and step, so no step reduces twice. Prints "OK <name>" per check.
"""
import warnings

import numpy as np
import torch

import tarantella as tnt

N, BATCH, EPOCHS, LR = 47, 10, 2, 0.5
rank, size = tnt.get_rank(), tnt.get_size()
g = torch.Generator().manual_seed(11)
X = torch.randn(N, 6, generator=g) * 3
Y = torch.randint(0, 3, (N,), generator=g)


def make_module():
    torch.manual_seed(7)
    return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))


def flat(module):
    return np.concatenate([p.detach().numpy().ravel() for p in module.parameters()])


def batches(epoch, rank=0, size=1):
    sampler = tnt.data.DistributedSampler(N, BATCH, shuffle=True, seed=9, rank=rank, size=size)
    sampler.set_epoch(epoch)
    return [sampler.step_info(step) for step in range(len(sampler))]


def serial(clip):
    module = make_module()
    opt = torch.optim.SGD(module.parameters(), lr=LR)
    for epoch in range(EPOCHS):
        for idx, _ in batches(epoch):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(module(X[idx]), Y[idx]).backward()
            if clip is not None:
                clip(list(module.parameters()))
            opt.step()
    return flat(module)


def by_norm(params):
    torch.nn.utils.clip_grad_norm_(params, 0.05)


def by_value(params):
    torch.nn.utils.clip_grad_value_(params, 0.002)


def check(name, got, ref):
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6, err_msg=name)
    everyone = tnt.allgather(got)
    for r in range(size):
        if not np.array_equal(everyone[r], got):
            raise AssertionError("%s: rank %d's weights differ from rank %d's" % (name, r, rank))
    print("OK %s" % name, flush=True)


unclipped = serial(None)
ref_norm, ref_value = serial(by_norm), serial(by_value)
for ref in (ref_norm, ref_value):  # the checks below mean something only if clipping bites
    assert np.abs(ref - unclipped).max() > 1e-3

for name, kwargs, ref in (("compile_clipnorm", {"clipnorm": 0.05}, ref_norm),
                          ("compile_clipvalue", {"clipvalue": 0.002}, ref_value)):
    model = tnt.Model(make_module())
    model.compile(optimizer=torch.optim.SGD(model.parameters(), lr=LR),
                  loss="sparse_categorical_crossentropy", **kwargs)
    model.fit(X, Y, batch_size=BATCH, epochs=EPOCHS, shuffle_seed=9, verbose=0)
    check(name, flat(model.module), ref)

for name in ("loop_clipnorm", "loop_resync"):
    module = make_module()
    tnt.broadcast_parameters(module)
    opt = tnt.DistributedOptimizer(torch.optim.SGD(module.parameters(), lr=LR), module)
    handed = [0]
    mark = opt.reducer._mark

    def counting_mark(i, from_backward=False):
        if not opt.reducer._marked[i]:
            handed[0] += 1
        return mark(i, from_backward)
    opt.reducer._mark = counting_mark
    steps = 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for epoch in range(EPOCHS):
            for idx, global_count in batches(epoch, rank, size):
                opt.zero_grad()
                opt.set_micro_batch(len(idx), global_count)
                if idx:
                    torch.nn.functional.cross_entropy(module(X[idx]), Y[idx]).backward()
                opt.synchronize()  # p.grad: the reduced, global gradient
                by_norm(list(module.parameters()))
                if name == "loop_clipnorm":
                    with opt.skip_synchronize():
                        opt.step()
                else:
                    opt.step()
                steps += 1
    n_params = len(list(module.parameters()))
    if handed[0] != steps * n_params:
        raise AssertionError("%s: %d gradients handed to the reducer in %d steps of %d "
                             "parameters: a step reduced twice" % (name, handed[0], steps,
                                                                   n_params))
    resync = [w for w in caught if "skip_synchronize" in str(w.message)]
    assert len(resync) == (1 if name == "loop_resync" else 0), [str(w.message) for w in caught]
    check(name, flat(module), ref_norm)

# step() inside skip_synchronize() while a reduction is in flight: an error
# on every rank, and the job goes on after synchronize().
idx, global_count = batches(0, rank, size)[0]
opt.zero_grad()
opt.set_micro_batch(len(idx), global_count)
torch.nn.functional.cross_entropy(module(X[idx]), Y[idx]).backward()
try:
    with opt.skip_synchronize():
        opt.step()
except RuntimeError as e:
    assert "synchronize()" in str(e), e
else:
    if size > 1:
        raise AssertionError("no error for step() in skip_synchronize() before synchronize()")
opt.synchronize()
print("OK skip_without_synchronize", flush=True)
