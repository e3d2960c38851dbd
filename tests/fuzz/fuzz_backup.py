#!/usr/bin/env python3
"""Mutation fuzzer for the backup loader (python/tarantella/_backup_file.py
and _plain_data.py). libFuzzer cannot drive Python, so this is a small
deterministic one: seeded by --seed, it takes the corpus files and mutates
them, for --iterations inputs or until --seconds have passed, whichever
comes first.

Each input goes through what every resume does with a backup file:
``_backup_file._load_backup`` (the checks and the weights-only unpickler),
then ``_restore_rng`` on a loaded one, then a draw from each generator. The property (docs/user-guide and
_backup_file.py's docstrings): a backup either loads or raises
TarantellaError (ValueError also counts as documented), never another
exception type, and nothing in a file ever runs: the corpus holds pickles
whose unpickling calls _tripwire, which must never fire.

Mutations: byte flips, truncations, insertions, chunk copies and splices
of two files (mostly stopped by the zip checks); the same inside one
member of the torch.save archive, re-zipped with valid CRCs, so mutated
pickles reach the unpickler; and "retype": a loaded backup with one value
somewhere replaced by a value of another type, saved again with
torch.save, which reaches the checks after the unpickler.

    fuzz_backup.py [--seed N] [--iterations N] [--seconds S] CORPUS_DIR
    fuzz_backup.py --write-corpus CORPUS_DIR    (with the real writer)

A failing input is written to --artifacts (default: the current directory)
as backup-crash-<seed>.pt, and each mutated input as backup-current-<seed>.pt
before it runs (removed after a clean run), so that one that kills the
interpreter is kept too; rerun one with --replay FILE. Exits 0, or 1 after
the first failure (or the signal's status after a crash).
"""
import argparse
import io
import os
import random
import sys
import time
import traceback
import zipfile

import numpy as np
import torch

import tarantella as tnt
from tarantella import _backup_file, preemption

TRIPPED = []


def _tripwire(*args):
    """What a hostile backup would run; called only by a full unpickler."""
    TRIPPED.append(args)
    return None


class Payload:
    def __reduce__(self):
        return (_tripwire, ("payload ran",))


# --------------------------------------------------------------------------
# The seed corpus, from the real writer
# --------------------------------------------------------------------------

def write_corpus(out):
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    np.random.seed(0)

    def saved(name, model, opt, **kw):
        path = os.path.join(out, name)
        preemption.save_training_state(path, model, opt, **kw)
        return path

    lin = torch.nn.Linear(3, 2)
    saved("custom_plain.pt", lin, None, epoch=1, step=2)
    sgd = torch.optim.SGD(lin.parameters(), lr=0.1, momentum=0.9)
    lin(torch.randn(4, 3)).sum().backward()
    sgd.step()
    extra = {"seed": 7, "lr": 0.05, "nan": float("nan"), "arr": np.arange(6, dtype=np.int16).reshape(2, 3),
             "nested": [1, (2.5, "x"), {"k": None}], "empty": np.zeros((0, 4), dtype=np.float32)}
    full = saved("custom_sgd_extra.pt", lin, sgd, epoch=3, step=0, extra=extra)

    # A fit backup, as BackupAndRestore writes it.
    bdir = os.path.join(out, ".fit")
    model = tnt.Model(torch.nn.Linear(2, 1))
    model.compile("sgd", loss="mse")
    x = np.random.rand(8, 2).astype(np.float32)
    y = np.random.rand(8, 1).astype(np.float32)
    cb = tnt.callbacks.BackupAndRestore(bdir, save_freq=1, delete_checkpoint=False)
    model.fit(x, y, batch_size=4, epochs=1, verbose=0, callbacks=[cb])
    os.replace(cb.backup_path, os.path.join(out, "fit.pt"))
    os.rmdir(bdir)

    with open(full, "rb") as f:
        data = f.read()
    with open(os.path.join(out, "truncated_half.pt"), "wb") as f:
        f.write(data[:len(data) // 2])
    with open(os.path.join(out, "empty.pt"), "wb"):
        pass
    # Hostile files: a pickled payload where a state dict belongs, and the
    # previous format's pickled RNG states. Loading either must not call
    # _tripwire.
    content = torch.load(full, weights_only=True)
    torch.save(dict(content, model=Payload()), os.path.join(out, "payload_model.pt"))
    import pickle
    torch.save(dict(content, version=1, rng=[pickle.dumps(Payload())]),
               os.path.join(out, "payload_rng_v1.pt"))
    # Regressions: what the fuzzer found, each fixed in _backup_file.py.
    # A tensor where an int or list belongs reached ==/truth tests
    # (RuntimeError); numpy's set_state segfaulted on a short state or a
    # position past its 624 keys.
    plain = torch.load(full, weights_only=True)
    torch.save(dict(plain, version=torch.tensor([2, 2])), os.path.join(out, "bug_version_tensor.pt"))
    torch.save(dict(plain, rng=torch.tensor([1, 2])), os.path.join(out, "bug_rng_tensor.pt"))
    rng0 = plain["rng"][0]
    torch.save(dict(plain, rng=[dict(rng0, numpy=())]), os.path.join(out, "bug_numpy_state_empty.pt"))
    numpy_state = list(rng0["numpy"])
    numpy_state[2] = 2**31 - 1
    torch.save(dict(plain, rng=[dict(rng0, numpy=tuple(numpy_state))]),
               os.path.join(out, "bug_numpy_state_pos.pt"))
    # random.setstate raised OverflowError, which _restore_rng let through.
    version, keys, gauss = rng0["python"]
    torch.save(dict(plain, rng=[dict(rng0, python=(version, (-1,) + tuple(keys[1:]), gauss))]),
               os.path.join(out, "bug_python_state_negative.pt"))
    print("fuzz_backup: wrote %d files to %s" % (len(os.listdir(out)), out))


# --------------------------------------------------------------------------
# Mutations
# --------------------------------------------------------------------------

def _bytes_mutation(rng, data, other):
    data = bytearray(data)
    op = rng.randrange(6)
    if op == 0 or not data:
        pos = rng.randrange(len(data) + 1)
        data[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
    elif op == 1:
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    elif op == 2:
        del data[rng.randrange(len(data)):]
    elif op == 3:
        pos = rng.randrange(len(data))
        del data[pos:pos + rng.randint(1, 64)]
    elif op == 4:
        pos = rng.randrange(len(data))
        data[pos] = rng.choice((0, 0xff, 0x7f, 0x80, ord("("), ord("."), ord("]")))
    else:
        cut = rng.randrange(len(data) + 1)
        data = data[:cut] + other[rng.randrange(len(other) + 1):]
    return bytes(data)


def _member_mutation(rng, data, other):
    """One member of the archive mutated (data.pkl most often), re-zipped
    so that the CRCs match and torch reads the mutated bytes."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            members = [(i, z.read(i)) for i in z.infolist()]
    except Exception:
        return _bytes_mutation(rng, data, other)
    if not members:
        return data
    pkl = [k for k, (i, _) in enumerate(members) if i.filename.endswith("data.pkl")]
    k = pkl[0] if pkl and rng.random() < 0.7 else rng.randrange(len(members))
    info, body = members[k]
    members[k] = (info, _bytes_mutation(rng, body, body))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
        for info, body in members:
            z.writestr(info.filename, body)
    return out.getvalue()


def _odd_value(rng):
    return rng.choice((
        None, True, -1, 0, 2, 2**70, "", "fit", "tarantella.backup", [], [None], {}, (),
        {"__tnt_float__": "x"}, {"__tnt_float__": 2**64},
        {"__tnt_ndarray__": ("<f8", [3], torch.zeros(8, dtype=torch.uint8))},
        {"__tnt_ndarray__": ("<i4", [2**62, 4], torch.zeros(0, dtype=torch.uint8))},
        {"__tnt_ndarray__": ("O", [1], torch.zeros(8, dtype=torch.uint8))},
        {"__tnt_ndarray__": 5},
        torch.zeros(()), torch.tensor([1, 2]), torch.tensor([2]), torch.zeros(0),
    ))


def _retype(rng, data):
    """A value of the loaded backup, at a random place, replaced by one of
    another type; the result saved with torch.save."""
    try:
        content = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception:
        return None
    if not isinstance(content, dict):
        return None
    # Walk down a random path of dicts and lists, then replace its end.
    holder, key = content, rng.choice(list(content) or [None])
    while True:
        value = holder.get(key) if isinstance(holder, dict) else holder[key]
        children = (list(value) if isinstance(value, dict)
                    else list(range(len(value))) if type(value) is list else [])
        if not children or rng.random() < 0.5:
            break
        holder, key = value, rng.choice(children)
    holder[key] = _odd_value(rng)
    out = io.BytesIO()
    torch.save(content, out)
    return out.getvalue()


def mutate(rng, corpus):
    name, data = corpus[rng.randrange(len(corpus))]
    other = corpus[rng.randrange(len(corpus))][1]
    choice = rng.random()
    if choice < 0.3:
        out = _retype(rng, data)
        if out is not None:
            return out
    if choice < 0.7:
        return _member_mutation(rng, data, other)
    return _bytes_mutation(rng, data, other)


# --------------------------------------------------------------------------
# The target and the property
# --------------------------------------------------------------------------

def run_one(data, path="/fuzz/tarantella-backup.pt"):
    """None when the loader behaved, else a description of what went wrong."""
    del TRIPPED[:]
    try:
        content = _backup_file._load_backup(path, data)
        _backup_file._restore_rng(content, path)
    except (tnt.TarantellaError, ValueError):
        pass
    except Exception:
        return "raised an undocumented exception:\n" + traceback.format_exc()
    # Training goes on drawing from the restored generators: a state that
    # was accepted must work (numpy trusted a position past its keys and
    # crashed on the next draw).
    try:
        np.random.random(700)
        random.random()
        torch.rand(1)
    except Exception:
        return "raised an undocumented exception:\n" + traceback.format_exc()
    if TRIPPED:
        return "the file ran code: _tripwire%r" % (TRIPPED[0],)
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("corpus", nargs="?")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--iterations", type=int, default=1000000)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--artifacts", default=".")
    ap.add_argument("--write-corpus", metavar="DIR")
    ap.add_argument("--replay", metavar="FILE")
    args = ap.parse_args()
    if args.write_corpus:
        write_corpus(args.write_corpus)
        return 0
    state = random.getstate(), np.random.get_state(), torch.get_rng_state()
    if args.replay:
        with open(args.replay, "rb") as f:
            problem = run_one(f.read())
        print("fuzz_backup: %s: %s" % (args.replay, problem or "OK"))
        return 1 if problem else 0
    names = sorted(os.listdir(args.corpus))
    corpus = []
    for name in names:
        with open(os.path.join(args.corpus, name), "rb") as f:
            corpus.append((name, f.read()))
    if not corpus:
        print("fuzz_backup: FAIL: no corpus in %s" % args.corpus)
        return 1

    def fail(data, problem, what):
        os.makedirs(args.artifacts, exist_ok=True)
        crash = os.path.join(args.artifacts, "backup-crash-%d.pt" % args.seed)
        with open(crash, "wb") as f:
            f.write(data)
        print("fuzz_backup: FAIL: %s %s\n(input saved as %s; rerun it with --replay)"
              % (what, problem, crash))
        return 1

    # The corpus first, as it is: each file is a regression input.
    for name, data in corpus:
        problem = run_one(data)
        if problem:
            return fail(data, problem, "corpus file %s" % name)
    rng = random.Random(args.seed)
    os.makedirs(args.artifacts, exist_ok=True)
    current = os.path.join(args.artifacts, "backup-current-%d.pt" % args.seed)
    deadline = time.monotonic() + args.seconds
    n = 0
    while n < args.iterations and time.monotonic() < deadline:
        data = mutate(rng, corpus)
        n += 1
        # A crash of the interpreter itself (a segfault in an extension)
        # leaves no Python to save the input, so it is on disk first.
        with open(current, "wb") as f:
            f.write(data)
        problem = run_one(data)
        # The loader may restore RNG states; the mutations must not depend
        # on them (rng is our own Random), but keep the process's clean.
        random.setstate(state[0])
        if problem:
            return fail(data, problem, "mutated input %d (seed %d)" % (n, args.seed))
    if os.path.exists(current):
        os.unlink(current)
    print("fuzz_backup: OK: %d corpus files and %d mutated inputs (seed %d) loaded or were "
          "refused with TarantellaError/ValueError; nothing ran" % (len(corpus), n, args.seed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
