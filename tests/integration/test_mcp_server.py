"""``rearank serve --mcp`` as an agent meets it: the official MCP client (SDK 2.x) spawns the server over stdio, or
connects over streamable HTTP to a server started with ``--port 0``; the oracle backend on dl19 judges the answers."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import anyio
import httpx
import pytest

from rearank.cli import main
from rearank.data.packs import load_docs, load_qrels, load_topics
from rearank.io.trec import read_run
from tests.conftest import require

require("mcp", "the MCP server is built on the official SDK (rearank[serve])")
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

#: Polls of the server's log, 100 ms apart, for the address it bound (60 s: it imports the SDK and loads the pack).
LOG_POLLS = 600


def judged_query(dl19: Path, depth: int = 20) -> tuple[str, list[str], list[int]]:
    """The first dl19 query with graded passages among its BM25 top ``depth``: text, passages, their grades."""
    qrels = load_qrels(dl19 / "qrels.txt")
    topics = load_topics(dl19 / "topics.tsv")
    for qid, pairs in read_run(dl19 / "run.bm25.top100.trec").items():
        ids = [d for d, _ in pairs[:depth]]
        grades = [qrels.get(qid, {}).get(d, 0) for d in ids]
        if len(set(grades)) >= 3:
            texts = load_docs(dl19 / "docs.tsv", set(ids))
            return topics[qid], [texts[d][1] for d in ids], grades
    raise AssertionError("no dl19 query with three grades in its top 20")


def server_env(dl19: Path, tmp_path: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "REARANK_DATA": str(dl19.parents[1]), "REARANK_CACHE": str(tmp_path / "cache"),
            "PYTHONPATH": str(Path(__file__).resolve().parents[2]), **extra}


SERVE = [sys.executable, "-m", "rearank", "serve", "--backend", "oracle", "--dataset", "dl19"]


def test_stdio_lists_tools_ranks_ideally_searches_and_refuses_bad_input(dl19, tmp_path):
    query, documents, grades = judged_query(dl19)
    params = StdioServerParameters(command=SERVE[0], args=[*SERVE[1:], "--mcp", "stdio"],
                                   env=server_env(dl19, tmp_path))
    qrels = load_qrels(dl19 / "qrels.txt")
    qid = {text: q for q, text in load_topics(dl19 / "topics.tsv").items()}[query]

    async def session() -> None:
        async with Client(params) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            assert set(tools) == {"rerank", "search_and_rerank"}
            assert set(tools["rerank"].input_schema["required"]) == {"query", "documents"}

            answer = await client.call_tool("rerank", {"query": query, "documents": documents, "top_n": 20})
            assert not answer.is_error, answer.content
            results = answer.structured_content["results"]
            assert sorted(r["index"] for r in results) == list(range(20))
            assert [grades[r["index"]] for r in results] == sorted(grades, reverse=True)
            scores = [r["relevance_score"] for r in results]
            assert scores == sorted(scores, reverse=True) and len(set(scores)) == 20
            top = await client.call_tool("rerank", {"query": query, "documents": documents, "top_n": 3})
            assert top.structured_content["results"] == results[:3]

            found = await client.call_tool("search_and_rerank", {"query": query, "k": 10})
            assert not found.is_error, found.content
            hits = found.structured_content["results"]
            assert len(hits) == 10 and len({h["docid"] for h in hits}) == 10
            hit_grades = [qrels[qid].get(h["docid"], 0) for h in hits]
            assert hit_grades == sorted(hit_grades, reverse=True) and hit_grades[0] == 3

            for arguments, message in [
                ({"query": query, "documents": []}, "give at least one document"),
                ({"query": " ", "documents": ["a"]}, "query is empty"),
                ({"query": query, "documents": ["a"], "top_n": 0}, "top_n"),
                ({"query": query, "documents": "a single string"}, "documents"),
                ({"query": query, "documents": ["x" * 20_001]}, "document 0 has 20001 characters"),
            ]:
                bad = await client.call_tool("rerank", arguments)
                assert bad.is_error and message in bad.content[0].text, (arguments, bad.content)
            bad = await client.call_tool("search_and_rerank", {"query": query, "k": 0})
            assert bad.is_error and "k" in bad.content[0].text

    anyio.run(session)


def bound_mcp_url(proc: subprocess.Popen, log: Path) -> str:
    """The address a ``--mcp http --port 0`` server printed once it bound its port."""
    for _ in range(LOG_POLLS):
        assert proc.poll() is None, log.read_text()
        found = re.search(r"serving MCP tools \(rerank\) at (http://127\.0\.0\.1:\d+/mcp)", log.read_text())
        if found:
            return found[1]
        time.sleep(0.1)
    raise AssertionError(f"the server did not print its address: {log.read_text()}")


def leaves(err: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) exception groups."""
    inner = getattr(err, "exceptions", None)  # BaseExceptionGroup (Python 3.11; anyio's backport before)
    return [leaf for each in inner for leaf in leaves(each)] if inner is not None else [err]


def test_http_needs_the_key_and_ranks_ideally(dl19, tmp_path):
    query, documents, grades = judged_query(dl19)
    env = {**server_env(dl19, tmp_path, REARANK_TEST_MCP_KEY="k-mcp-42")}
    with open(tmp_path / "server.log", "w") as log:
        # no --dataset: the oracle judges with --qrels/--topics/--docs, and no corpus means no search tool
        proc = subprocess.Popen([*SERVE[:6], "--qrels", str(dl19 / "qrels.txt"), "--topics", str(dl19 / "topics.tsv"),
                                 "--docs", str(dl19 / "docs.tsv"), "--mcp", "http", "--port", "0",
                                 "--api-key-env", "REARANK_TEST_MCP_KEY"], stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            url = bound_mcp_url(proc, tmp_path / "server.log")

            async def session(key: str) -> list[dict]:
                http = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
                async with http, Client(streamable_http_client(url, http_client=http)) as client:
                    assert [t.name for t in (await client.list_tools()).tools] == ["rerank"]
                    answer = await client.call_tool("rerank", {"query": query, "documents": documents})
                    assert not answer.is_error, answer.content
                    return answer.structured_content["results"]

            results = anyio.run(session, "k-mcp-42")
            assert [grades[r["index"]] for r in results] == sorted(grades, reverse=True)

            refused = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                                 headers={"Authorization": "Bearer wrong", "Accept": "application/json"})
            assert refused.status_code == 401 and "invalid API key" in refused.json()["error"]["message"]
            assert httpx.post(url, json={}).status_code == 401
            with pytest.raises(BaseException) as refused_client:  # the SDK's client raises inside its task group
                anyio.run(session, "wrong")
            assert any(isinstance(leaf, MCPError) for leaf in leaves(refused_client.value)), refused_client.value
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    assert "k-mcp-42" not in (tmp_path / "server.log").read_text()


@pytest.mark.parametrize(("argv", "message"), [
    (["--corpus", "corpus.jsonl"], "add --mcp stdio or --mcp http"),
    (["--mcp", "stdio", "--api-key-env", "X"], "--api-key-env guards HTTP"),
    (["--mcp", "http", "--backend", "oracle", "--dataset", "dl19", "--search-depth", "2000"],
     "--search-depth 2000 is over --max-documents 1000"),
])
def test_mcp_argument_errors(argv, message, dl19, monkeypatch, capsys):
    monkeypatch.setenv("REARANK_DATA", str(dl19.parents[1]))
    assert main(["serve", *argv]) == 2
    assert message in capsys.readouterr().err
