"""RankLLM's side of bench/bench_rankllm.py, run by ``.venv-rankllm/bin/python`` (RankLLM's own environment).

    rankllm_client.py fix REQUESTS OUT       passages through ftfy.fix_text, as RankLLM cleans them
    rankllm_client.py messages REQUESTS      RankLLM's messages of each query's first window (rank 80-100), JSON
    rankllm_client.py rerank REQUESTS URL    RankLLM's RankGPT (SafeOpenai) against URL; wall seconds and rankings
    rankllm_client.py batched REQUESTS URL   the same through RankLLM's batched mode (sliding_windows_batched)

REQUESTS: a JSON list in RankLLM's request shape ({"query": {"text", "qid"}, "candidates": [{"docid", "score",
"doc": {"contents"}}]}). Output: one JSON object on stdout.

tiktoken downloads its ``cl100k_base`` table at first use; offline, RankLLM's token counts (its context-length
check and its own output-token estimate) use a whitespace stand-in. At ``CONTEXT_SIZE`` the check never cuts a
dl19 window (passages keep RankLLM's 300-word cut either way); the benchmark takes its token counts from the
server.

Batched mode: rank-llm 0.25.7 runs ``sliding_windows_batched`` (each window position of every query in one batch,
the next position when the whole batch is answered) only for its in-process engines (``RankListwiseOSLLM``: vLLM,
SGLang, TensorRT-LLM); ``SafeOpenai.create_prompt_batched`` and ``run_llm_batched`` are stubs and 0.25.7 has no
``rerank_batch_async``. ``_reranker(batched=True)`` fills in the two stubs the way its vLLM reranker does (each query's
prompt from ``create_prompt``; the batch's prompts sent to the server at once, through ``run_llm``), so RankLLM's
own batched loop runs against the server.
"""

from __future__ import annotations

import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import tiktoken

CONTEXT_SIZE = 8192  # the server's --max-model-len
_real_get_encoding = tiktoken.get_encoding


class _Whitespace:
    """The stand-in encoding: one token per whitespace word."""

    def encode(self, text: str) -> list[str]:
        return text.split()


def _encoding_source() -> str:
    try:
        _real_get_encoding("cl100k_base")
        return "tiktoken cl100k_base"
    except Exception:  # noqa: BLE001 (no network: the table cannot be downloaded)
        tiktoken.get_encoding = lambda name: _Whitespace()
        return "whitespace stand-in (tiktoken's cl100k_base cannot be downloaded here)"


def _requests(path: str) -> list:
    from dacite import from_dict
    from rank_llm.data import Request

    with open(path, encoding="utf-8") as handle:
        return [from_dict(data_class=Request, data=r) for r in json.load(handle)]


def _reranker(base_url: str = "http://127.0.0.1:1/v1/", batched: bool = False):
    from rank_llm.rerank.listwise.rank_gpt import SafeOpenai
    from rank_llm.rerank.rankllm import PromptMode

    class Batched(SafeOpenai):
        """SafeOpenai whose batch calls send all prompts of a batch at once (see the module docstring)."""

        def create_prompt_batched(self, results, rank_start, rank_end):
            return [self.create_prompt(result, rank_start, rank_end) for result in results]

        def run_llm_batched(self, prompts, current_window_size=None):
            with ThreadPoolExecutor(max_workers=len(prompts)) as pool:
                return list(pool.map(lambda prompt: self.run_llm(prompt, current_window_size), prompts))

    return (Batched if batched else SafeOpenai)(model="embedded", context_size=CONTEXT_SIZE,
                                                prompt_mode=PromptMode.RANK_GPT, keys="none", base_url=base_url,
                                                window_size=20, stride=10)


def fix(path: str, out: str) -> dict:
    from ftfy import fix_text

    with open(path, encoding="utf-8") as handle:
        requests = json.load(handle)
    changed = 0
    for request in requests:
        for candidate in request["candidates"]:
            fixed = fix_text(candidate["doc"]["contents"])
            changed += fixed != candidate["doc"]["contents"]
            candidate["doc"]["contents"] = fixed
    with open(out, "w", encoding="utf-8") as handle:
        json.dump(requests, handle)
    return {"changed_passages": changed}


def messages(path: str) -> dict:
    from rank_llm.data import Result

    reranker = _reranker()
    out = []
    for request in _requests(path):
        result = Result(query=request.query, candidates=request.candidates, invocations_history=[])
        end = len(request.candidates)
        prompt, _ = reranker.create_prompt(result, max(0, end - 20), end)
        out.append(prompt)
    return {"messages": out}


def rerank(path: str, base_url: str) -> dict:
    requests = _requests(path)
    reranker = _reranker(base_url.rstrip("/") + "/")
    started = time.perf_counter()
    results = reranker.rerank_batch(requests, rank_start=0, rank_end=100)
    wall = time.perf_counter() - started
    return {"wall": wall, "rankings": [[str(c.docid) for c in r.candidates] for r in results]}


def batched(path: str, base_url: str) -> dict:
    requests = _requests(path)
    reranker = _reranker(base_url.rstrip("/") + "/", batched=True)
    end = min(100, *(len(r.candidates) for r in requests))
    started = time.perf_counter()
    results = reranker.sliding_windows_batched(requests, rank_start=0, rank_end=end, top_k_retrieve=end)
    wall = time.perf_counter() - started
    return {"wall": wall, "rankings": [[str(c.docid) for c in r.candidates] for r in results]}


def main() -> None:
    source = _encoding_source()
    action, *args = sys.argv[1:]
    out = {"fix": fix, "messages": messages, "rerank": rerank, "batched": batched}[action](*args)
    out["tiktoken"] = source
    print(json.dumps(out))


if __name__ == "__main__":
    main()
