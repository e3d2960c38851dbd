#!/usr/bin/python3
"""The inter-node allreduce cost model, shared by libtnt and docs/scaling.md.

libtnt/src/coll/multinode/cost_model.c implements the same formulas in C and
picks the algorithm with them; the constants (alpha, beta, gamma, the
smallest chunk) are read from libtnt/src/coll/multinode/cost_model.h, so
both sides use one set. unit.cost_model compares the two (--dump).

    cost_model.py --dump                  costs and choices on a grid (for the C twin)
    cost_model.py --fit RESULTS... [--placement far] [--fix-gamma --gamma-ns-per-b G]
                                          fit alpha, beta, gamma (or alpha and beta, gamma
                                          held at G) to benchmark lines
                                          (RESULT tarantella <algo> <N>x1 <bytes> <us> <GB/s>)
                                          and print measured against predicted
    cost_model.py --predict [--alpha-us A] [--link-gbps G] [--gamma-ns-per-b C]
                                          bus bandwidth per algorithm, 16..1024 nodes x
                                          4 and 8 ranks per node (default: HDR 200 Gb/s)

Model (cost_model.h has the full text): a step moving s bytes each way and
reducing r bytes, in k pipelined chunks, takes
    alpha + max(s beta L, r gamma) + min(s beta L, r gamma) / k
with L ranks sharing each node's link and S ranks sharing a core (gamma S).
On the test machine every simulated node is on one host: L = S = the job's
ranks (the fit uses that; so does libtnt with its built-in constants). ring: n-1 reducing steps of m/n,
n-1 copying steps of m/n; recursive doubling: log2 p reducing steps of m;
Rabenseifner: log2 p reducing steps of m/2, m/4, ..., then the same sizes
copying; n != p adds one reducing and one copying step of m (the fold).
"""
import argparse
import math
import os
import re
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
HEADER = os.path.join(HERE, "..", "..", "libtnt", "src", "coll", "multinode", "cost_model.h")
ALGOS = ("recursive_doubling", "rabenseifner", "ring", "tree")  # tie order, as in C
DEPTH = 4
CHUNK = 1 << 20  # TNT_MULTINODE_CHUNK_KB default
HOST_CORES = 2  # the test machine: simulated nodes share its 2 vCPUs


def read_constants(path=HEADER):
    want = {"TNT_MN_COST_ALPHA_S": "alpha", "TNT_MN_COST_BETA_S_PER_B": "beta",
            "TNT_MN_COST_GAMMA_S_PER_B": "gamma", "TNT_MN_MIN_CHUNK_BYTES": "min_chunk"}
    got = {}
    with open(path) as f:
        for line in f:
            m = re.match(r"#define\s+(\w+)\s+([0-9.eE+-]+)\s*$", line)
            if m and m.group(1) in want:
                got[want[m.group(1)]] = float(m.group(2))
    missing = set(want.values()) - set(got)
    if missing:
        sys.exit(f"cost_model.py: {path} lacks {sorted(missing)}")
    got["min_chunk"] = int(got["min_chunk"])
    return got


C = read_constants()


class Params:
    def __init__(self, alpha=C["alpha"], beta=C["beta"], gamma=C["gamma"], links=1,
                 cpu_share=1, chunk=CHUNK, depth=DEPTH, shared_host=False, cores=1.0):
        self.alpha, self.beta, self.gamma = alpha, beta, gamma
        self.links, self.cpu_share, self.chunk, self.depth = links, cpu_share, chunk, depth
        self.shared_host, self.cores = shared_host, cores


def chunk_for(nbytes, chunk, depth, esize=1):
    want = (nbytes + depth - 1) // depth if depth > 1 else nbytes
    want = max(want, C["min_chunk"])
    want = min(want, chunk)
    want = want // esize * esize
    return max(want, esize)


def shared_host(alpha, beta, gamma, ranks, cores):
    """Twin of tnt_mn_cost_shared_host: ranks on one host share its link and cores."""
    return Params(alpha=alpha * max(1.0, ranks / cores), beta=beta, gamma=gamma, links=ranks,
                  cpu_share=ranks, shared_host=True, cores=cores if cores > 0 else 1)


def cost_step(s, r, active, n, p):
    """Twin of cost_step in cost_model.c: `active` of the n members send."""
    alpha, links, cpu_share = p.alpha, p.links, p.cpu_share
    if p.shared_host and active < n:
        f, over = active / n, p.links / p.cores
        alpha = p.alpha / max(1.0, over) * max(1.0, over * f)
        links = max(p.cores, links * f)
        cpu_share = max(p.cores, cpu_share * f)
    wire = s * p.beta * links
    reduce = r * p.gamma * cpu_share
    chunk = float(chunk_for(int(s), p.chunk, p.depth)) if s > 0 else 1.0
    k = math.ceil(s / chunk) if s > 0 else 1.0
    hi, lo = max(wire, reduce), min(wire, reduce)
    return alpha + hi + lo / k


def pow2_below(n):
    p, rounds = 1, 0
    while p * 2 <= n:
        p, rounds = p * 2, rounds + 1
    return p, rounds


def cost(algo, n, nbytes, p):
    if n <= 1:
        return 0.0
    pow2, rounds = pow2_below(n)
    if algo == "ring":
        block = math.ceil(nbytes / n)
        return (n - 1) * cost_step(block, block, n, n, p) + (n - 1) * cost_step(block, 0, n, n, p)
    t = 0.0
    if algo == "tree":
        mask = 1
        while mask < n:
            senders = tree_senders(n, mask)
            t += cost_step(nbytes, nbytes, senders, n, p) + cost_step(nbytes, 0, senders, n, p)
            mask *= 2
        return t
    if algo == "recursive_doubling":
        t = rounds * cost_step(nbytes, nbytes, pow2, n, p)
    elif algo == "rabenseifner":
        s = float(nbytes)
        for _ in range(rounds):
            s = math.ceil(s / 2)
            t += cost_step(s, s, pow2, n, p) + cost_step(s, 0, pow2, n, p)
    else:
        raise ValueError(algo)
    if pow2 != n:
        t += (cost_step(nbytes, nbytes, n - pow2, n, p) +
              cost_step(nbytes, 0, n - pow2, n, p))
    return t


def tree_senders(n, mask):
    """Members of 0 .. n-1 whose lowest set bit is mask (twin of tree_senders)."""
    return (n - mask - 1) // (2 * mask) + 1 if n > mask else 0


def select(n, nbytes, p):
    best, best_t = ALGOS[0], cost(ALGOS[0], n, nbytes, p)
    for a in ALGOS[1:]:
        t = cost(a, n, nbytes, p)
        if t < best_t:
            best, best_t = a, t
    return best


def steps(algo, n):
    """Sequential message steps of one allreduce."""
    pow2, rounds = pow2_below(n)
    fold = 2 if pow2 != n else 0
    tree = 2 * (rounds if pow2 == n else rounds + 1)
    return {"ring": 2 * (n - 1), "recursive_doubling": rounds + fold,
            "rabenseifner": 2 * rounds + fold, "tree": tree}[algo]


GRID_NODES = (2, 3, 4, 5, 7, 8, 13, 16, 64, 256, 1000, 1024)
GRID_BYTES = (8, 4096, 65536, 1 << 20, 3 << 20, 16 << 20, 64 << 20)
GRID_LINKS = (1, 4)


def dump():
    """One line per grid point: n bytes links cost(rd) cost(rab) cost(ring) cost(tree) choice
    (links 0: the shared host of the built-in constants, n ranks on 2 cores)."""
    for n in GRID_NODES:
        p = shared_host(C["alpha"], C["beta"], C["gamma"], n, 2)
        for b in GRID_BYTES:
            costs = " ".join(f"{cost(a, n, b, p):.9e}" for a in ALGOS)
            print(f"{n} {b} 0 {costs} {select(n, b, p)}")
    for links in GRID_LINKS:
        p = Params(links=links, cpu_share=1 if links == 1 else 3)
        for n in GRID_NODES:
            for b in GRID_BYTES:
                costs = " ".join(f"{cost(a, n, b, p):.9e}" for a in ALGOS)
                print(f"{n} {b} {links} {costs} {select(n, b, p)}")


def load_results(paths, placement="close"):
    """{(algo, nodes, bytes): median seconds} from RESULT lines of NxL layouts with L = 1
    (and, where the line ends with a vcpu_probe placement, only that placement)."""
    rows = {}
    for path in paths:
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) < 7 or parts[0] != "RESULT" or parts[1] != "tarantella":
                    continue
                algo, layout = parts[2], parts[3]
                nodes, _, per = layout.partition("x")
                if per != "1" or algo not in ALGOS:
                    continue
                if len(parts) >= 8 and parts[7] != placement:
                    continue
                rows.setdefault((algo, int(nodes), int(parts[4])), []).append(
                    float(parts[5]) * 1e-6)
    return {k: statistics.median(v) for k, v in rows.items()}


def fit(paths, placement, fixed_gamma=None):
    import numpy as np
    from scipy.optimize import least_squares

    data = load_results(paths, placement)
    if not data:
        sys.exit("cost_model.py --fit: no RESULT tarantella <algo> <N>x1 lines")
    keys = sorted(data)

    # Simulated nodes share one host: every rank shares its link and CPUs.
    def host(n, alpha, beta, gamma):
        return shared_host(alpha, beta, gamma, n, HOST_CORES)

    # On loopback beta and gamma are CPU time of the same cores and hard to
    # tell apart; --fix-gamma holds gamma (e.g. at the reduction kernel's
    # measured rate) and fits alpha and beta only.
    def unpack(x):
        if fixed_gamma is not None:
            return math.exp(x[0]), math.exp(x[1]), fixed_gamma
        return tuple(math.exp(v) for v in x)

    def residuals(x):
        a0, b0, g0 = unpack(x)
        return np.array([math.log(cost(a, n, b, host(n, a0, b0, g0)) / data[(a, n, b)])
                         for a, n, b in keys])

    x0 = np.log([C["alpha"], C["beta"]] + ([] if fixed_gamma is not None else [C["gamma"] * 0.7]))
    res = least_squares(residuals, x0)
    alpha, beta, gamma = unpack(res.x)
    if fixed_gamma is not None:
        print(f"gamma held at {gamma * 1e9:.3f} ns/B (--fix-gamma)")
    print(f"fitted on {len(keys)} medians: alpha {alpha * 1e6:.1f} us, beta {beta * 1e9:.3f} ns/B "
          f"({1 / beta / 1e9:.3f} GB/s), gamma {gamma * 1e9:.3f} ns/B ({1 / gamma / 1e9:.2f} GB/s)")
    err = [abs(cost(a, n, b, host(n, alpha, beta, gamma)) / data[(a, n, b)] - 1) for a, n, b in keys]
    print(f"relative error: median {statistics.median(err) * 100:.0f}%, "
          f"max {max(err) * 100:.0f}%")
    print()
    print("| nodes | bytes | algorithm | measured (us) | model (us) | model / measured |")
    print("|---:|---:|---|---:|---:|---:|")
    for a, n, b in sorted(keys, key=lambda k: (k[1], k[2], k[0])):
        m, t = data[(a, n, b)], cost(a, n, b, host(n, alpha, beta, gamma))
        print(f"| {n} | {b} | {a} | {m * 1e6:.0f} | {t * 1e6:.0f} | {t / m:.2f} |")
    print()
    # The choices of the fitted model and of the built-in constants (cost_model.h)
    # against the fastest measured algorithm; the ratio is the picked one's time
    # over the fastest one's.
    print("| nodes | bytes | fastest measured | fitted model picks | picked / fastest "
          "| built-in picks | picked / fastest |")
    print("|---:|---:|---|---|---:|---|---:|")
    ratios = {"fitted": [], "built-in": []}
    for n in sorted({k[1] for k in keys}):
        for b in sorted({k[2] for k in keys if k[1] == n}):
            have = {a: data[(a, n, b)] for a in ALGOS if (a, n, b) in data}
            if len(have) < len(ALGOS):
                continue
            fastest = min(have, key=have.get)
            pick = select(n, b, host(n, alpha, beta, gamma))
            old = select(n, b, host(n, C["alpha"], C["beta"], C["gamma"]))
            ratios["fitted"].append(have[pick] / have[fastest])
            ratios["built-in"].append(have[old] / have[fastest])
            print(f"| {n} | {b} | {fastest} | {pick} | {have[pick] / have[fastest]:.2f} "
                  f"| {old} | {have[old] / have[fastest]:.2f} |")
    if ratios["fitted"]:
        print()
        for name, r in ratios.items():
            geo = math.exp(sum(math.log(x) for x in r) / len(r))
            print(f"{name} constants over {len(r)} cells: fastest in {sum(x == 1 for x in r)}, "
                  f"picked / fastest geometric mean {geo:.3f}, worst {max(r):.2f}")


def predict(alpha_us, link_gbps, gamma_ns):
    beta = 1.0 / (link_gbps * 1e9)
    link = link_gbps * 1e9
    print(f"alpha {alpha_us} us, link {link_gbps} GB/s per node, gamma {gamma_ns} ns/B; "
          "inter-node phase only; bus bandwidth = 2 (n-1)/n M / T as a share of the link")
    for per_node in (4, 8):
        p = Params(alpha=alpha_us * 1e-6, beta=beta, gamma=gamma_ns * 1e-9, links=per_node)
        print()
        print(f"### {per_node} ranks per node")
        print()
        print("| bucket | nodes | ring | recursive doubling | Rabenseifner | selected | steps |")
        print("|---:|---:|---:|---:|---:|---|---:|")
        for mb in (1, 64):
            M = mb << 20
            m = math.ceil(M / per_node)  # each local rank's slice
            for n in (16, 32, 64, 128, 256, 512, 1024):
                bus = {a: 2 * (n - 1) / n * M / cost(a, n, m, p) / link for a in ALGOS}
                pick = select(n, m, p)
                cells = " | ".join(f"{bus[a] * 100:.1f}%" for a in ("ring", "recursive_doubling",
                                                                      "rabenseifner"))
                print(f"| {mb} MiB | {n} | {cells} | {pick} | {steps(pick, n)} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dump", action="store_true")
    ap.add_argument("--fit", nargs="+", metavar="RESULTS")
    ap.add_argument("--placement", default="close", help="vcpu_probe placement to fit")
    ap.add_argument("--fix-gamma", action="store_true",
                    help="--fit: hold gamma at --gamma-ns-per-b, fit alpha and beta")
    ap.add_argument("--predict", action="store_true")
    ap.add_argument("--alpha-us", type=float, default=1.5)
    ap.add_argument("--link-gbps", type=float, default=25.0)
    ap.add_argument("--gamma-ns-per-b", type=float, default=C["gamma"] * 1e9)
    args = ap.parse_args()
    if args.dump:
        dump()
    elif args.fit:
        fit(args.fit, args.placement, args.gamma_ns_per_b * 1e-9 if args.fix_gamma else None)
    elif args.predict:
        predict(args.alpha_us, args.link_gbps, args.gamma_ns_per_b)
    else:
        ap.print_help()
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
