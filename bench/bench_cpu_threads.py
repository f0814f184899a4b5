"""One embedded-model window on CPU with and without ``OMP_WAIT_POLICY=PASSIVE`` (:mod:`rearank.machine.startup`), in one run.

Each trial ranks the same window (the first dl19 query's BM25 top ``--window`` passages, one listwise window, the
embedded SmolLM2-135M on the hf backend, greedy) in two fresh processes, their environments cleared of OpenMP
settings: one imports torch before rearank, so OpenMP starts before rearank can set its default and idle threads
spin (libgomp's ``GOMP_SPINCOUNT`` 300000: what every entry point ran with before the default); the other imports
rearank first, as every entry point does, so OpenMP starts passive (spin count 0). The two alternate, trial by trial,
so both see the same load. Prints, for each, the spin count torch's OpenMP started with (read back from
``OMP_DISPLAY_ENV``), the model's load time, the window's seconds per trial and their median, the completion tokens,
and whether every process gave the same answer. The gap grows with the machine's load (other processes on its
cores); on an idle machine it is small.

    python bench/bench_cpu_threads.py [--trials 3] [--window 10] [--max-new-tokens 128]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Variant name -> the imports its process starts with.
VARIANTS = {"spinning (torch imported first, no default)": "import torch\nimport rearank\n",
            "PASSIVE (rearank's default)": "import rearank\nimport torch\n"}
CHILD = """
import json, sys, time, warnings
warnings.simplefilter("ignore")
from rearank import Reranker
from rearank.data.packs import load_requests
window, max_new_tokens = int(sys.argv[1]), int(sys.argv[2])
request = load_requests(dataset="dl19", top_k=window, max_queries=1)[0]
started = time.perf_counter()
reranker = Reranker("embedded", backend="hf", window=window, step=window, top_k=window,
                    max_new_tokens=max_new_tokens)
loaded = time.perf_counter()
ranking = reranker.rerank(request.query.text, [c.text for c in request.candidates])
done = time.perf_counter()
trace = ranking.traces[0]
print(json.dumps({"load_s": loaded - started, "window_s": done - loaded, "order": ranking.order,
                  "completion_tokens": trace.completion_tokens, "output": trace.raw_output}))
"""


def run_once(imports: str, window: int, max_new_tokens: int) -> dict:
    """One process: its figures, and the spin count its first OpenMP runtime (torch's) started with."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "GOMP_"))}
    env.update(OMP_DISPLAY_ENV="VERBOSE", PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1")
    done = subprocess.run([sys.executable, "-c", imports + CHILD, str(window), str(max_new_tokens)], env=env,
                          capture_output=True, text=True, cwd=ROOT, check=False)
    if done.returncode:
        raise SystemExit(f"bench_cpu_threads: a window process failed:\n{done.stderr[-2000:]}")
    spin = re.search(r"GOMP_SPINCOUNT = '(\d+)'", done.stderr)
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "spincount": spin[1] if spin else "?"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=3, help="processes per variant, alternating")
    parser.add_argument("--window", type=int, default=10, help="passages in the window")
    parser.add_argument("--max-new-tokens", type=int, default=128)
    args = parser.parse_args()
    print(f"bench_cpu_threads: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at start; one window "
          f"of {args.window} dl19 passages, embedded SmolLM2-135M (hf, greedy), max_new_tokens {args.max_new_tokens}, "
          f"{args.trials} trials per variant", flush=True)
    results: dict[str, list[dict]] = {name: [] for name in VARIANTS}
    started = time.perf_counter()
    for trial in range(args.trials):
        for name, imports in VARIANTS.items():
            result = run_once(imports, args.window, args.max_new_tokens)
            results[name].append(result)
            print(f"  trial {trial + 1}, {name}: window {result['window_s']:.1f} s (load average "
                  f"{os.getloadavg()[0]:.2f})", flush=True)
    print(f"{'variant':<46} {'GOMP_SPINCOUNT':>14} {'load s':>7} {'window s (median)':>18}  trials   tokens")
    for name, runs in results.items():
        seconds = [r["window_s"] for r in runs]
        print(f"{name:<46} {runs[0]['spincount']:>14} {statistics.median(r['load_s'] for r in runs):>7.1f} "
              f"{statistics.median(seconds):>18.1f}  {' '.join(f'{s:.1f}' for s in seconds)}   "
              f"{runs[0]['completion_tokens']}")
    outputs = {r["output"] for runs in results.values() for r in runs}
    slow, fast = (statistics.median(r["window_s"] for r in runs) for runs in results.values())
    print(f"spinning / passive: {slow / fast:.2f}x; identical output in every process: {len(outputs) == 1}; "
          f"load average {os.getloadavg()[0]:.2f} at the end; {time.perf_counter() - started:.0f} s in all")


if __name__ == "__main__":
    main()
