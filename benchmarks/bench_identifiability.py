"""Time of the exact RPNA vs number of bodies (serial chains of 10..1000 bodies).

Run: ``.venv/bin/python benchmarks/bench_identifiability.py [--max-numerical 80]``

Chains are `fg_sysid.robots.paper003.random_chain` (generic modified-DH rows, 3/4 revolute and 1/4
prismatic joints, gravity -z). For each size the best of ``--repeat`` runs is reported, with the
time per body and the ratio to the smallest size's time per body (1.0 = perfectly linear). For sizes
up to ``--max-numerical`` the numerical check (regressors at >= 3x #params/nv random states + SVD) is
timed as well, for contrast.
"""

from __future__ import annotations

import argparse
import time
import warnings

from fg_sysid.identifiability import rpna
from fg_sysid.identifiability.numerical import numerical_identifiability
from fg_sysid.robots.paper003 import random_chain


def best_time(fn, repeat):
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10,20,50,100,200,500,1000")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--max-numerical", type=int, default=50)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"{'bodies':>7s} {'params':>7s} {'identif.':>8s} {'RPNA [s]':>10s} {'ms/body':>8s} {'ratio':>6s} "
          f"{'numerical [s]':>13s} {'rank':>6s}")
    ref = None
    for n in sizes:
        model = random_chain(n, seed=1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t, res = best_time(lambda model=model: rpna(model), args.repeat)
            per = t / n
            ref = ref or per
            num = ""
            rank = ""
            if n <= args.max_numerical:
                tn, nr = best_time(lambda model=model: numerical_identifiability(model), 1)
                num, rank = f"{tn:13.3f}", f"{nr.rank:6d}"
        print(f"{n:7d} {10 * n:7d} {res.identifiable:8d} {t:10.4f} {1e3 * per:8.3f} {per / ref:6.2f} "
              f"{num:>13s} {rank:>6s}", flush=True)
    print("ratio = (time per body) / (time per body at the smallest size); constant => O(N)")


if __name__ == "__main__":
    main()
