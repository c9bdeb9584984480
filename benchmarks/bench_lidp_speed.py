"""LiDP Gaussian study: the library's hot spots before and after the speed-up, side by side in
one run (issue #4, "Speed").

    OMP_NUM_THREADS=1 python benchmarks/bench_lidp_speed.py [--quick]

"Before" is the code of commit ``REFERENCE`` (``dpaudit/mechanisms/lidp_gaussian.py`` and
``dpaudit/estimators/lidp.py`` as they were), loaded from git into this process; "after" is the
working tree. Tables:

1. Gram sampler, seconds per trial (K inserted + K null scores), d = 10^4, and the direct
   sampler (the reference, unchanged) for the Gram-vs-direct ratio.
2. d = 10^3: K = 512 (Gram before and after) and K = 1024 > d (before: the direct fallback;
   after: the p x d Bartlett factor).
3. The ``lidp`` estimator (``run_lidp``: split of the file into inserted/null columns,
   ``threshold: heldout``, 500-point sweep on n held-out rows, bound on n evaluation rows) on
   one score file, per estimator; "same" says whether every output field is identical.
4. One ``scripts/simulate.py``-equivalent call (``registry.simulate`` + ``scores.write``) and a
   ``scores.read`` for the largest settings. Before-sampling at these sizes takes minutes, so it
   is measured on ``--sub`` trials and scaled linearly (sampling is linear in n; marked "~").
"""

from __future__ import annotations

import math
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dpaudit import scores  # noqa: E402
from dpaudit.estimators.lidp.audit import run_lidp  # noqa: E402
from dpaudit.mechanisms import lidp_gaussian as lg  # noqa: E402
from dpaudit.mechanisms.registry import simulate  # noqa: E402

#: The commit before the speed-up.
REFERENCE = "e74a1ca"


def load_reference(path: str, name: str, edit=lambda src: src) -> types.ModuleType:
    """``path`` as of commit REFERENCE (its source passed through ``edit``), imported as
    module ``name``."""
    src = subprocess.run(
        ["git", "show", f"{REFERENCE}:{path}"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    src = edit(src)
    mod = types.ModuleType(name)
    mod.__file__ = f"{REFERENCE}:{path}"
    sys.modules[name] = mod  # dataclasses look their module up
    exec(compile(src, mod.__file__, "exec"), mod.__dict__)
    return mod


old_lg = load_reference("dpaudit/mechanisms/lidp_gaussian.py", "old_lidp_gaussian")
# the old estimator, reading this tree's XBern intervals (moved to estimators/lidp/ since)
old_lidp = load_reference(
    "dpaudit/estimators/lidp.py",
    "old_lidp",
    lambda src: src.replace("estimators import xbern", "estimators.lidp import xbern").replace(
        "estimators.xbern import", "estimators.lidp.xbern import"
    ),
)
# the old runner (old split_in_out), not registered a second time, calling the old estimator
old_audit = load_reference(
    "dpaudit/estimators/lidp_audit.py",
    "old_lidp_audit",
    lambda src: src.replace('@register("lidp", designs=("lidp",))', "")
    .replace("from dpaudit.estimators.registry import register\n", "")
    .replace("from dpaudit.estimators import lidp\n", "import old_lidp as lidp\n"),
)


def clock(f, *args, repeat: int = 1, **kw) -> float:
    best = math.inf
    for _ in range(repeat):
        t = time.perf_counter()
        f(*args, **kw)
        best = min(best, time.perf_counter() - t)
    return best


def per_trial(mod, n: int, K: int, d: int, method: str = "gram", repeat: int = 2) -> float:
    return clock(mod.sample_scores, n, K, K, d, 1.0, 0, method, repeat=repeat) / n


def sampler_table(quick: bool) -> None:
    print("### 1. Gram sampler, d = 10^4, m = K: seconds per trial\n")
    print("| K | before | after | speed-up | direct | direct / after |")
    print("|---|---|---|---|---|---|")
    for K, n, n_direct in ((16, 4000, 20), (64, 1000, 10), (256, 200, 4), (1024, 16, 0)):
        if quick:
            n, n_direct = max(8, n // 4), max(2, n_direct // 2) if n_direct else 0
        before = per_trial(old_lg, n, K, 10**4)
        after = per_trial(lg, n, K, 10**4)
        if n_direct:
            direct = per_trial(lg, n_direct, K, 10**4, "direct", repeat=1)
            tail = f"{direct:.2e} | {direct / after:.0f}x"
        else:
            tail = "- | -"
        print(f"| {K} | {before:.2e} | {after:.2e} | {before / after:.1f}x | {tail} |")
    print("\n### 2. d = 10^3 (Fig. 3 middle / Fig. 8), m = K: seconds per trial\n")
    print("| K | before | after | speed-up |")
    print("|---|---|---|---|")
    for K, n_before, n_after in ((512, 20, 100), (1024, 2, 40)):
        before = per_trial(old_lg, n_before, K, 1000, repeat=1)
        after = per_trial(lg, n_after // (4 if quick else 1), K, 1000)
        how = "gram" if K + 1 <= 1000 else "direct fallback"
        print(f"| {K} | {before:.2e} ({how}) | {after:.2e} | {before / after:.0f}x |")


def same_row(a: dict, b: dict) -> bool:
    return all(a[k] == b[k] or (a[k] != a[k] and b[k] != b[k]) for k in a)


def estimator_table(quick: bool) -> None:
    print("\n### 3. `lidp` estimator on one score file (n held-out + n evaluation trials)\n")
    print("| n | K | estimator | before (s) | after (s) | speed-up | same |")
    print("|---|---|---|---|---|---|---|")
    sizes = ((1024, 32), (4096, 64), (65536, 256)) if not quick else ((1024, 32), (16384, 128))
    for n, K in sizes:
        sf = lg.score_file(
            n=n, K=K, d=10**4, epsilon=2.0, delta=1e-5, seed=0, heldout_trials="n", heldout_seed=1
        )
        for interval, order in (("wilson", 1), ("wilson", 2), ("wilson", 4), ("bernstein", 2)):
            params = {"interval": interval, "order": order}
            after = clock(run_lidp, sf, params, repeat=2)
            row_after = run_lidp(sf, params)[0]
            before = clock(old_audit.run_lidp, sf, params, repeat=2)
            row_before = old_audit.run_lidp(sf, params)[0]
            print(
                f"| {n} | {K} | {interval}{order} | {before:.3f} | {after:.3f} | "
                f"{before / after:.1f}x | {same_row(row_before, row_after)} |"
            )


def file_table(quick: bool, sub: int) -> None:
    print("\n### 4. One simulate call (registry.simulate + scores.write) and a read, per file\n")
    print(
        "| n | K | d | simulate before (s) | simulate after (s) | speed-up | write (s) "
        "| read (s) | MB on disk |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    settings = [(65536, 256, 10**4), (4096, 1024, 1000)]
    if quick:
        settings = [(4096, 256, 10**4), (1024, 1024, 1000)]
    for n, K, d in settings:
        params = dict(n=n, K=K, d=d, epsilon=2.0, delta=1e-5, heldout_trials="n", heldout_seed=1)
        t = time.perf_counter()
        sf = simulate("lidp_gaussian", params, seed=0, experiment="bench", setting="s")
        after = time.perf_counter() - t
        # before: the reference sampler on `sub` (held-out + evaluation) trials, scaled
        rows = 2 * n
        t = time.perf_counter()
        old_lg.sample_scores(sub, K, K, d, lg.sigma_for_epsilon(2.0, 1e-5), 0)
        before = (time.perf_counter() - t) * rows / sub
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "s.npz"
            t_write = clock(scores.write, path, sf)
            t_read = clock(scores.read, path)
            mb = path.stat().st_size / 2**20
        print(
            f"| {n} | {K} | {d} | ~{before + t_write:.1f} | {after + t_write:.1f} | "
            f"~{(before + t_write) / (after + t_write):.1f}x | {t_write:.1f} | {t_read:.1f} "
            f"| {mb:.0f} |"
        )
        del sf


def main() -> None:
    quick = "--quick" in sys.argv
    sub = int(sys.argv[sys.argv.index("--sub") + 1]) if "--sub" in sys.argv else 256
    print(f"(before = commit {REFERENCE}; one process, OMP_NUM_THREADS=1)\n")
    sampler_table(quick)
    estimator_table(quick)
    file_table(quick, sub)


if __name__ == "__main__":
    main()
