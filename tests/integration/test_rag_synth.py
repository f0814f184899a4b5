"""``rearank synth --mode barrag-selector|barrag-generator|arena`` on the shared QA samples, the noisy-oracle reader
behind the chat server (``n`` samples a request), and the resumable BAR-RAG training filter."""

import json
import threading

import pyarrow.parquet as pq
import pytest

from data_synthesis.qa_rows import QARowsConfig, first_stage, qa_rows
from rearank.backends.base import Generation, Prompt, SamplingSettings
from rearank.backends.chat_server import ChatServer
from rearank.backends.qa_oracle import WRONG_ANSWER, QAOracleBackend
from rearank.cli import main as rearank_main
from rearank.io.qa import load_qa
from rearank.methods.barrag.prompt import generator_messages
from rearank.methods.barrag.reader import ReaderError, sample_reader
from rearank.rag.barrag.train_filter import LOG, FilterSettings, run_filter
from rearank.types import Passage, QAItem
from tests.conftest import require_pack


@pytest.fixture(scope="module")
def qa():
    return require_pack("qa")


def test_bm25_ranks_the_matching_passage_first():
    item = QAItem("q", "where is the eiffel tower", ("Paris",),
                  (Passage("a", "", "cats sleep a lot"), Passage("b", "", "the eiffel tower is in paris")))
    ranked = first_stage([item])["q"]  # Lucene BM25 (rearank.data.bm25), the one BM25 of the project
    assert [(p.pid, s > 0) for p, s in ranked] == [("b", True), ("a", False)]


def test_synth_with_a_corpus_takes_the_open_retrieval_top_25(qa, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("REARANK_CACHE", str(tmp_path / "cache"))
    files = [str(qa / "hotpotqa" / "train_distractor.sample100.json"), str(qa / "musique" / "train_ans.sample100.json")]
    assert rearank_main(["rag", "corpus", "--qa", *files, "--output", str(tmp_path / "corpus.jsonl")]) == 0
    out = tmp_path / "rows"
    assert rearank_main(["synth", "--mode", "barrag-selector", "--qa", files[0], "--qa-limit", "10", "--corpus",
                         str(tmp_path / "corpus.jsonl"), "--depth", "50", "--tokenizer", "none", "--val-fraction",
                         "0", "--output-dir", str(out), "--quiet"]) == 0
    rows = pq.read_table(out / "train.parquet").to_pylist()
    truth = json.loads(rows[0]["reward_model"]["ground_truth"])
    assert len(rows) == 10 and len(truth["docs"]) == 25 and truth["scores"] == sorted(truth["scores"], reverse=True)
    assert all(pid.startswith("p") for pid in rows[0]["extra_info"]["pids"])  # corpus ids, not the item's own
    assert sum(bool(json.loads(r["reward_model"]["ground_truth"])["supporting"]) for r in rows) >= 5


def test_rows_of_each_mode():
    item = QAItem("q1", "Where is the Eiffel Tower?", ("Paris",),
                  tuple(Passage(str(i), f"T{i}", f"text {i}" + (" eiffel tower" if i == 7 else "")) for i in range(12)),
                  frozenset({"7", "11"}), "hotpotqa")
    rows, _ = qa_rows([item], QARowsConfig("barrag-selector", val_fraction=0.0))
    truth = json.loads(rows[0]["reward_model"]["ground_truth"])
    assert rows[0]["extra_info"]["pids"][0] == "7" and truth["supporting"] == [1, 12]  # BM25 puts pid 7 first
    assert len(truth["docs"]) == 12 and truth["scores"][0] > 0 and "Doc [12]: (Title: T11)" in rows[0]["prompt"][1]["content"]
    rows, _ = qa_rows([item], QARowsConfig("arena", val_fraction=0.0))
    truth = json.loads(rows[0]["reward_model"]["ground_truth"])
    assert truth == {"answers": ["Paris"], "supporting": [8]}  # 10 paragraphs shown: pid 7 is no. 8, pid 11 cut off
    assert "\n10. T9: text 9" in rows[0]["prompt"][1]["content"]
    rows, skipped = qa_rows([item], QARowsConfig("barrag-generator", val_fraction=0.0), evidence={"q1": ["11", "3"]})
    assert json.loads(rows[0]["reward_model"]["ground_truth"]) == {"answers": ["Paris"], "n_docs": 2, "supporting": [1]}
    _, skipped = qa_rows([item], QARowsConfig("barrag-generator"), evidence={})
    assert skipped == {"no_evidence": 1}


@pytest.mark.parametrize("mode", ["barrag-selector", "barrag-generator", "arena"])
def test_synth_cli_writes_verl_parquet(qa, tmp_path, mode, capsys):
    out = tmp_path / mode
    code = rearank_main(["synth", "--mode", mode, "--qa", str(qa / "musique" / "train_ans.sample100.json"),
                         "--qa-limit", "20", "--tokenizer", "none", "--output-dir", str(out)])
    assert code == 0 and "rows: train 18 / val 2" in capsys.readouterr().out
    table = pq.read_table(out / "train.parquet").to_pylist()
    assert len(table) == 18 and table[0]["reward_model"]["style"] == "rule"
    truth = json.loads(table[0]["reward_model"]["ground_truth"])
    assert truth["answers"] and all(isinstance(i, int) for i in truth["supporting"])
    if mode == "arena":  # MuSiQue: all 20 paragraphs shown
        assert len(table[0]["extra_info"]["pids"]) == 20
    stats = json.loads((out / "stats.json").read_text())
    assert stats["rows"] == {"train": 18, "val": 2}


def test_synth_cli_needs_qa_files(tmp_path, capsys):
    assert rearank_main(["synth", "--mode", "arena", "--output-dir", str(tmp_path)]) == 2
    assert "give --qa FILE" in capsys.readouterr().err


def test_noisy_oracle_reader(qa):
    path = qa / "hotpotqa" / "train_distractor.sample100.json"
    item = load_qa(path, limit=1)[0]
    reader = QAOracleBackend(str(path), p=0.5, seed=3)
    gold = [p for p in item.passages if p.pid in item.supporting]
    other = [p for p in item.passages if p.pid not in item.supporting]
    shown = Prompt(messages=tuple(generator_messages(item.question, gold)))
    hidden = Prompt(messages=tuple(generator_messages(item.question, other)))
    hot = SamplingSettings(temperature=1.0)
    answers = [g.text for g in reader.generate([shown] * 200, hot)]
    right = sum(f"<answer>{item.answers[0]}</answer>" in a for a in answers)
    assert 60 < right < 140  # p = 0.5 over 200 independent copies (binomial sd ~7)
    assert answers == [g.text for g in reader.generate([shown] * 200, hot)]  # seeded: the same draws again
    assert all(WRONG_ANSWER in g.text for g in reader.generate([hidden] * 20, hot))
    assert item.answers[0] in reader.generate([shown], SamplingSettings(temperature=0))[0].text


class _Selector:
    """A test selector: picks 5 of the first 10 candidates by a fixed rotation; fails on marked questions."""

    name = "test-selector"

    def __init__(self, fail_on=()):
        self.fail_on, self.calls = set(fail_on), 0

    def generate(self, prompts, settings):
        out = []
        for j, prompt in enumerate(prompts):
            text = prompt.messages[-1]["content"]
            if any(q in text for q in self.fail_on):
                return [Generation("", 0, 0, "error")] * len(prompts)
            ids = [(j + k) % 10 + 1 for k in range(5)]
            out.append(Generation("<think>x</think><answer>" + ", ".join(f"[{i}]" for i in ids) + "</answer>", 1, 1))
        return out


def _serve(backend, name):
    server = ChatServer(backend, name)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_barrag_filter_judges_resumes_and_keeps(qa, tmp_path, capsys):
    path = qa / "hotpotqa" / "train_distractor.sample100.json"
    data = tmp_path / "sel"
    assert rearank_main(["synth", "--mode", "barrag-selector", "--qa", str(path), "--qa-limit", "12",
                         "--tokenizer", "none", "--output-dir", str(data)]) == 0
    questions = [r["extra_info"]["qid"] for r in pq.read_table(data / "train.parquet").to_pylist()]
    first_question = load_qa(path, limit=1)[0].question
    reader = _serve(QAOracleBackend(str(path), p=0.7), "reader")
    failing = _serve(_Selector(fail_on=[first_question]), "sel")
    settings = FilterSettings(failing.base_url, "sel", reader.base_url, "reader", retries=0)
    out = tmp_path / "filtered"
    stats = run_filter(data, out, settings, progress=False)
    assert not stats["complete"] and stats["failed_this_run"] == 1 and stats["judged"] == len(questions) - 1
    assert not (out / "train.parquet").exists()
    logged = (out / LOG).read_text().splitlines()

    good = _serve(_Selector(), "sel")
    stats = run_filter(data, out, FilterSettings(good.base_url, "sel", reader.base_url, "reader"), progress=False)
    assert stats["complete"] and stats["judged"] == len(questions)
    log = [json.loads(line) for line in (out / LOG).read_text().splitlines()]
    assert (out / LOG).read_text().splitlines()[: len(logged)] == logged and len(log) == len(questions)
    for record in log:  # 8 selections x 10 reader answers; accuracies are multiples of 0.1
        assert len(record["accuracies"]) == 8 and all(abs(a * 10 - round(a * 10)) < 1e-9 for a in record["accuracies"])
    kept = {r["qid"] for r in log if r["keep"]}
    assert {r["extra_info"]["qid"] for r in pq.read_table(out / "train.parquet").to_pylist()} == kept
    assert stats["kept"] == len(kept) and (out / "val.parquet").is_file()


def test_reader_client_errors(qa):
    import asyncio

    reader = _serve(QAOracleBackend(str(qa / "hotpotqa" / "train_distractor.sample100.json")), "reader")
    url = reader.base_url + "/chat/completions"
    texts = asyncio.run(sample_reader(url, "reader", [{"role": "user", "content": "Question: x"}], 3))
    assert len(texts) == 3
    with pytest.raises(ReaderError, match="HTTP 404"):  # wrong model name: not retried
        asyncio.run(sample_reader(url, "other", [{"role": "user", "content": "x"}], 2))
    with pytest.raises(ReaderError, match="HTTP 400"):  # n over the server's limit
        asyncio.run(sample_reader(url, "reader", [{"role": "user", "content": "x"}], 1000))
