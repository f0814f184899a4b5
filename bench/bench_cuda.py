"""The CUDA paths of rearank, run on a GPU machine with a tiny random model (mechanics only, not quality).

Each path runs as a user runs it (the CLI in a subprocess, the Python face, the HTTP server on an inherited socket)
and is timed: ``rearank doctor``; listwise sliding windows on the hf backend on CUDA in the default dtype (bfloat16
where the GPU has it), on CUDA in float32 and on CPU in float32 (the two float32 runs' rankings compared); groupwise
on CUDA; pointwise with the scorer backend on CUDA; ``Reranker(...).rank`` on CUDA; ``rearank serve`` answering
``POST /v1/rerank`` from CUDA; RRPO training (``rearank rag rrpo train``) for two steps on CUDA and ``--resume``
for two more. Prints one line a path and writes ``<out>/cuda_paths.json``.

    python bench/bench_cuda.py --model DIR [--qa FILE] [--queries 4] [--out DIR]

``--model``: a Hugging Face folder (``recipes.checks.models.tiny_base`` makes the 3.2M-parameter one); the dl19
pack is read from ``$REARANK_DATA``. Not a test: CI has no GPU (docs/testing.md, "CUDA paths").
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx


def rearank(*args: str, **options: Any) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rearank", *args], capture_output=True, text=True, check=False,
                          timeout=900, **options)


def rankings(run: Path) -> dict[str, list[str]]:
    """qid -> docids in rank order, from a TREC run."""
    rows: dict[str, list[tuple[int, str]]] = {}
    for line in run.read_text(encoding="utf-8").splitlines():
        qid, _, docid, rank, *_ = line.split()
        rows.setdefault(qid, []).append((int(rank), docid))
    return {qid: [d for _, d in sorted(pairs)] for qid, pairs in rows.items()}


def rerank_path(name: str, out: Path, model: str, queries: int, *extra: str) -> dict[str, Any]:
    run = out / f"{name}.run"
    mark = time.perf_counter()
    proc = rearank("rerank", "--dataset", "dl19", "--max-queries", str(queries), "--backend", "hf", "--model", model,
                   "--max-new-tokens", "32", "--output", str(run), "--no-progress", *extra)
    row: dict[str, Any] = {"path": name, "seconds": round(time.perf_counter() - mark, 1), "rc": proc.returncode}
    if proc.returncode:
        return {**row, "error": (proc.stderr or proc.stdout)[-1500:]}
    stats = json.loads(run.with_name(run.name + ".stats.json").read_text(encoding="utf-8"))
    return {**row, "queries": len(rankings(run)), "stats": {k: stats[k] for k in sorted(stats)
                                                           if isinstance(stats[k], (int, float, str))}}


def python_face(model: str) -> dict[str, Any]:
    from rearank.api import Reranker

    reranker = Reranker(backend="hf", model=model, max_new_tokens=32)
    mark = time.perf_counter()
    ranked = reranker.rerank("what is a cuda core", ["a gpu has many cores", "bananas are yellow", "cuda runs kernels"])
    weights = next(reranker.backend.model.parameters())
    reranker.close()
    return {"path": "python-face", "seconds": round(time.perf_counter() - mark, 1), "rc": 0,
            "device": str(weights.device), "dtype": str(weights.dtype), "ranked": len(ranked.order)}


def server_path(model: str) -> dict[str, Any]:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "rearank", "serve", "--backend", "hf", "--model", model,
                             "--fd", str(listener.fileno())], pass_fds=[listener.fileno()],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    listener.close()
    mark = time.perf_counter()
    try:
        body = {"query": "what is a cuda core", "documents": ["a gpu has many cores", "bananas", "cuda kernels"]}
        response = httpx.post(f"http://127.0.0.1:{port}/v1/rerank", json=body, timeout=300)
        return {"path": "serve /v1/rerank", "seconds": round(time.perf_counter() - mark, 1), "rc": 0,
                "status": response.status_code, "results": len(response.json().get("results", []))}
    except httpx.HTTPError as err:
        proc.terminate()
        return {"path": "serve /v1/rerank", "rc": 1, "error": f"{err!r}: {proc.communicate(timeout=60)[0][-1500:]}"}
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def rrpo_path(model: str, qa: Path, out: Path) -> dict[str, Any]:
    settings = [f"data={qa}", "limit=4", "eval_data=null", f"output={out / 'rrpo'}", f"scorer={model}",
                "kind=causal-yes", "max_passage_tokens=48", "device=cuda", "reader=noisy-gold", "reader_model=null",
                "reader_options={}", "k=2", "batch_size=2", "epochs=1", "save_every=1"]
    flags = [arg for kv in settings for arg in ("--set", kv)]
    config = str(Path(__file__).resolve().parents[1] / "recipes" / "rrpo" / "hotpotqa.yaml")
    mark = time.perf_counter()
    first = rearank("rag", "rrpo", "train", "--config", config, *flags, "--no-progress")
    if first.returncode:
        return {"path": "rrpo train", "rc": first.returncode, "error": (first.stderr or first.stdout)[-1500:]}
    again = rearank("rag", "rrpo", "train", "--config", config, *flags, "--set", "epochs=2", "--resume",
                    "--no-progress")
    state = json.loads((out / "rrpo" / "checkpoint" / "state.json").read_text(encoding="utf-8"))
    return {"path": "rrpo train + resume", "seconds": round(time.perf_counter() - mark, 1), "rc": again.returncode,
            "steps": state["step"], **({"error": again.stderr[-1500:]} if again.returncode else {})}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="Hugging Face model folder (a tiny random model)")
    parser.add_argument("--qa", type=Path, help="HotpotQA-format JSON for the RRPO path (skipped without it)")
    parser.add_argument("--queries", type=int, default=4, help="dl19 queries per rerank path")
    parser.add_argument("--out", type=Path, default=Path("bench/out/cuda"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    model = str(Path(args.model).resolve())
    doctor = rearank("doctor", "--check", "cuda")
    rows: list[dict[str, Any]] = [{"path": "doctor --check cuda", "rc": doctor.returncode,
                                   "line": next((l for l in doctor.stdout.splitlines() if "cuda" in l), "")}]
    rows.append(rerank_path("listwise-cuda-default", args.out, model, args.queries))
    rows.append(rerank_path("listwise-cuda-float32", args.out, model, args.queries, "-O", "dtype=float32"))
    rows.append(rerank_path("listwise-cpu-float32", args.out, model, args.queries, "-O", "device=cpu",
                            "-O", "dtype=float32"))
    cuda32, cpu32 = (args.out / f"listwise-{d}-float32.run" for d in ("cuda", "cpu"))
    if cuda32.is_file() and cpu32.is_file():
        a, b = rankings(cuda32), rankings(cpu32)
        rows.append({"path": "cuda vs cpu float32", "rc": 0, "queries": len(a),
                     "same_ranking": sum(a[q] == b.get(q) for q in a)})
    rows.append(rerank_path("groupwise-cuda", args.out, model, args.queries, "--method", "groupwise"))
    rows.append(rerank_path("pointwise-scorer-cuda", args.out, model, args.queries, "--method", "pointwise",
                            "--backend", "scorer", "-O", "kind=causal-yes"))
    for check in (python_face, server_path):
        try:
            rows.append(check(model))
        except Exception as err:  # noqa: BLE001 - a path that fails is a row of the report, not the end of it
            rows.append({"path": check.__name__, "rc": 1, "error": repr(err)[-1500:]})
    if args.qa:
        rows.append(rrpo_path(model, args.qa, args.out))
    import torch

    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no CUDA device"
    for row in rows:
        print(json.dumps(row)[:600], flush=True)
    (args.out / "cuda_paths.json").write_text(json.dumps({"device": device, "torch": torch.__version__,
                                                          "paths": rows}, indent=1) + "\n", encoding="utf-8")
    return int(any(row["rc"] for row in rows))


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
