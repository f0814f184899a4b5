"""The RRPO trainer and pointwise scorer on a tiny real transformers model built offline (word-level vocab,
one Llama layer): episodes, the cached baseline, checkpoint + resume, and the trained scorer used by
`rag eval --selector pointwise:` and `rerank --method pointwise`."""

from __future__ import annotations

import json

import pytest
import torch
import yaml

from rearank.backends.registry import make_backend
from rearank.backends.scorer import PointwiseScorer
from rearank.cli import main
from rearank.errors import RearankError
from rearank.io.requests_jsonl import write_requests
from rearank.rag.readers import GoldReader
from rearank.rag.rrpo.trainer import RRPOConfig, build_trainer

WORDS = [
    "who",
    "wrote",
    "what",
    "where",
    "when",
    "is",
    "the",
    "a",
    "of",
    "in",
    "alpha",
    "beta",
    "gamma",
    "delta",
    "river",
    "city",
    "book",
    "song",
    "answer",
]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    vocab = {
        w: i
        for i, w in enumerate(
            [
                "[PAD]",
                "[UNK]",
                "yes",
                "no",
                ":",
                "?",
                ".",
                "Query",
                "Document",
                "Is",
                "relevant",
                "to",
                "Answer",
                "or",
                *WORDS,
                *map(str, range(20)),
            ]
        )
    }
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]", eos_token="[PAD]")
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(vocab),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=256,
    )
    path = tmp_path_factory.mktemp("tiny") / "scorer"
    LlamaForCausalLM(config).save_pretrained(path)
    fast.save_pretrained(path)
    return path


def qa_file(path, n=6):
    records = []
    for i in range(n):
        ctxs = [
            {
                "id": f"d{j}",
                "title": WORDS[j],
                "text": f"alpha {j} river",
                "isgold": j == i % 4,
                "hasanswer": j == i % 4,
            }
            for j in range(4)
        ]
        records.append({"id": f"q{i}", "question": f"who wrote {i} ?", "answers": [f"answer {i}"], "ctxs": ctxs})
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def config(tmp_path, model, **extra):
    tmp_path.mkdir(parents=True, exist_ok=True)
    base = {
        "data": str(qa_file(tmp_path / "train.jsonl")),
        "output": str(tmp_path / "run"),
        "scorer": str(model),
        "reader": "gold",
        "k": 2,
        "epochs": 2,
        "batch_size": 3,
        "lr": 1e-3,
        "save_every": 1,
        "device": "cpu",
        "max_passage_tokens": 16,
    }
    return RRPOConfig.from_dict({**base, **extra})


def test_scorer_kinds_and_load(tiny_model):
    scorer = PointwiseScorer.load(tiny_model, device="cpu")
    assert scorer.kind == "causal-yes"
    scores = scorer.scores("who wrote it ?", [("alpha", "river"), ("beta", "city"), ("", "book")])
    assert scores.shape == (3,) and scores.requires_grad
    one = scorer.scores("who wrote it ?", [("beta", "city")]).detach()
    assert float(one[0]) == pytest.approx(float(scores[1].detach()), abs=1e-5)  # left padding does not change a score
    with pytest.raises(RearankError, match="bad options for the scorer backend"):
        make_backend("scorer", tiny_model, colour="red")


def test_scorer_backend_ranks_pointwise_on_the_engine(tiny_model):
    from rearank.engine import Engine
    from rearank.methods import Listwise, Pointwise
    from rearank.types import Candidate, Query, Request

    backend = make_backend("scorer", tiny_model, device="cpu")
    docs = [("alpha", "river"), ("beta", "city"), ("", "book"), ("gamma", "song"), ("delta", "answer")]
    req = Request(Query("q", "who wrote it ?"), tuple(Candidate(f"d{i}", 0.0, text, title)
                                                     for i, (title, text) in enumerate(docs)))
    with torch.inference_mode():
        scores = backend.scorer.scores("who wrote it ?", docs[:4]).tolist()
    result = Engine(backend, Pointwise(top_k=4), batch_size=3).rerank([req], progress=False)[0]
    assert [c.docid for c in result.candidates] == [f"d{i}" for i in sorted(range(4), key=lambda i: -scores[i])] + [
        "d4"]
    assert [float(t.raw_output) for t in result.traces] == pytest.approx(scores, abs=1e-5)
    with pytest.raises(RearankError, match="--method pointwise"):
        Engine(backend, Listwise())


def test_training_logs_caches_baseline_and_saves(tmp_path, tiny_model):
    reader = GoldReader()
    trainer = build_trainer(config(tmp_path, tiny_model), reader)
    before = [p.detach().clone() for p in trainer.policy.model.parameters()]
    trainer.train(progress=False)
    log = [json.loads(x) for x in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == [1, 2, 3, 4]  # 6 questions / batch 3 = 2 steps an epoch, 2 epochs
    # rewards lie in [-1, 3]; the first step's policy is the reference: no KL
    assert all(-1 <= r["reward"] <= 3 and -1 <= r["ref_reward"] <= 3 for r in log)
    assert log[0]["kl"] == pytest.approx(0.0, abs=1e-9)
    # baseline: 6 questions x k=2 reader calls, all in epoch 1; policy episodes: 4 steps x 3 questions x 2
    assert log[1]["baseline_calls"] == 12 and log[-1]["baseline_calls"] == 12
    assert log[-1]["reader_calls"] == 12 + 24
    after = list(trainer.policy.model.parameters())
    assert any(not torch.equal(a, b) for a, b in zip(before, after))
    assert all(torch.equal(a, b) for a, b in zip(before, trainer.reference.model.parameters()))
    assert PointwiseScorer.load(tmp_path / "run" / "final").kind == "causal-yes"
    with pytest.raises(RearankError, match="already holds an RRPO run"):
        build_trainer(config(tmp_path, tiny_model), reader)


def test_resume_matches_an_uninterrupted_run(tmp_path, tiny_model):
    straight = build_trainer(config(tmp_path / "a", tiny_model), GoldReader())
    straight.train(progress=False)
    first = build_trainer(config(tmp_path / "b", tiny_model, epochs=1), GoldReader())
    first.train(progress=False)
    with pytest.raises(RearankError, match="settings differ"):
        build_trainer(config(tmp_path / "b", tiny_model, lr=0.5), GoldReader(), resume=True)
    resumed = build_trainer(config(tmp_path / "b", tiny_model), GoldReader(), resume=True)
    assert (resumed.step, resumed.epoch) == (2, 1) and resumed.baseline_calls == 12
    resumed.train(progress=False)
    assert resumed.baseline_calls == 12  # the baseline cache came back with the checkpoint
    logs = [
        [json.loads(x)["reward"] for x in (tmp_path / d / "run" / "log.jsonl").read_text().splitlines()]
        for d in ("a", "b")
    ]
    assert logs[0] == pytest.approx(logs[1])
    for p, q in zip(straight.policy.model.parameters(), resumed.policy.model.parameters()):
        assert torch.allclose(p, q, atol=1e-6)


def test_cli_train_then_eval_and_rerank_with_the_scorer(tmp_path, tiny_model, capsys):
    cfg = config(tmp_path, tiny_model, eval_data=str(qa_file(tmp_path / "heldout.jsonl", 3)))
    path = tmp_path / "rrpo.yaml"
    path.write_text(yaml.safe_dump({k: v for k, v in vars(cfg).items() if v is not None}))
    assert main(["rag", "rrpo", "train", "--config", str(path), "--set", "epochs=1", "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "trained 2 steps" in printed and "held-out, reference:" in printed and "held-out, epoch 1:" in printed
    log = [json.loads(x) for x in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    assert [r.get("heldout") for r in log] == ["reference", None, None, "epoch 1"]
    final = tmp_path / "run" / "final"
    out = tmp_path / "eval"
    assert (
        main(
            [
                "rag",
                "eval",
                "--data",
                cfg.data,
                "--selector",
                f"pointwise:{final}",
                "--k",
                "1,2",
                "--output-dir",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    rows = [json.loads(x) for x in (out / "items.jsonl").read_text().splitlines()]
    scorer = PointwiseScorer.load(final)
    from rearank.io.qa import load_qa

    first = load_qa(cfg.data)[0]
    with torch.inference_mode():
        scores = scorer.scores(first.question, [(p.title, p.text) for p in first.passages]).tolist()
    by_score = sorted(range(len(scores)), key=lambda i: -scores[i])
    assert rows[0]["ranking"] == [first.passages[i].pid for i in by_score]
    requests = tmp_path / "requests.jsonl"
    write_requests(requests, [i.to_request() for i in load_qa(cfg.data)])
    run = tmp_path / "pointwise.run"
    assert (
        main(
            [
                "rerank",
                "--requests",
                str(requests),
                "--method",
                "pointwise",
                "--model",
                str(final),
                "-o",
                str(run),
                "--no-progress",
            ]
        )
        == 0
    )
    head = [line.split()[2] for line in run.read_text().splitlines() if line.startswith("q0 ")]
    assert head == rows[0]["ranking"]
    assert main(["rag", "rrpo", "train", "--config", str(path), "--set", "colour=red"]) == 2


def test_recipe_config_parses():
    from tests.conftest import ROOT

    config = RRPOConfig.from_yaml(ROOT / "recipes" / "rrpo" / "hotpotqa.yaml")
    # the paper's HotpotQA settings
    assert (config.k, config.epochs, config.lr, config.batch_size, config.beta, config.clip_eps) == (
        3, 2, 2e-6, 32, 0.1, 0.2)
    with pytest.raises(RearankError, match="unknown RRPO settings"):
        RRPOConfig.from_yaml(ROOT / "recipes" / "rrpo" / "hotpotqa.yaml", {"learning_rate": 1.0})
    # AmbigNQ (App. B): k 5, 4 epochs, lr 1.6e-6; BM25 top 100 of DPR's passages; readers on two servers
    ambig = RRPOConfig.from_yaml(ROOT / "recipes" / "rrpo" / "ambignq.yaml")
    assert (ambig.k, ambig.epochs, ambig.lr, ambig.batch_size, ambig.corpus, ambig.depth) == (
        5, 4, 1.6e-6, 32, "wikipedia-dpr-100w", 100)
    assert len(ambig.reader_options["base_url"]) == 2
