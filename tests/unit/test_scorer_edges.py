"""Pointwise scorer edges on fake models whose logits are sums of token ids (exact scores from the prompt text):
the causal and cross-encoder prompts, left padding, batching, passage truncation, the backend's answers; then
``load`` and ``save`` on the tiny saved Llama of test_rrpo_trainer.py and on a recording fake of transformers."""

from __future__ import annotations

import json
import re
import sys
from types import SimpleNamespace

import pytest
import torch

from rearank.backends import scorer as scorer_module
from rearank.backends.base import Prompt, SamplingSettings
from rearank.backends.models import ModelSource
from rearank.backends.scorer import PointwiseScorer, ScorerBackend
from rearank.errors import RearankError
from tests.unit.test_rrpo_trainer import tiny_model  # noqa: F401 (a fixture)

torch.set_num_threads(1)  # mutmut forks one test run per mutant: one thread each keeps its CPU time bounded

QUESTION = "\nIs the document relevant to the query? Answer yes or no."
VOCAB = ["[PAD]", "[UNK]", "[BOS]", "[EOS]", "yes", "no", ":", "?", ".", ",", "Query", "Document", "Is", "the",
         "relevant", "to", "Answer", "or", "who", "wrote", "it", "alpha", "beta", "river", "city", "book", "<", ">",
         "u", "a", "/", "user"]


def tokenizer(pad: bool = True):
    """A word-level tokenizer over VOCAB that puts [BOS] before every text unless told not to."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    ids = {w: i for i, w in enumerate(VOCAB)}
    tok = Tokenizer(models.WordLevel(ids, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(single="[BOS] $A", pair="[BOS] $A $B:1",
                                                       special_tokens=[("[BOS]", 2)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", eos_token="[EOS]", bos_token="[BOS]",
                                   **({"pad_token": "[PAD]"} if pad else {}))


def ids(text: str) -> list[int]:
    """Token ids of ``text`` without [BOS], looked up by hand in VOCAB (unknown words: [UNK])."""
    return [VOCAB.index(t) if t in VOCAB else 1 for t in re.findall(r"\w+|[^\w\s]+", text)]


class FakeModel(torch.nn.Module):
    """logits of a causal row at position t: "yes" = the sum of the ids up to t, "no" = the id at t, so a score is
    sum(ids) - last id; a cross-encoder's: (number of real tokens, sum of ids)[:labels]. Records each batch."""

    def __init__(self, labels: int | None = None, pad_token_id: int | None = None) -> None:
        super().__init__()
        self.one = torch.nn.Parameter(torch.ones(()))
        self.labels = labels
        self.config = SimpleNamespace(pad_token_id=pad_token_id)
        self.calls: list[dict] = []

    def forward(self, input_ids, attention_mask, logits_to_keep=0, **_):
        meta = input_ids.device.type == "meta"  # no values on the meta device
        self.calls.append({"rows": input_ids.shape[0], "keep": logits_to_keep, "device": input_ids.device.type,
                           "ids": None if meta else input_ids.tolist()})
        ids_, mask = input_ids.double(), attention_mask.double()
        if self.labels is not None:
            logits = torch.stack([mask.sum(1), (ids_ * mask).sum(1)], dim=1)[:, :self.labels]
            return SimpleNamespace(logits=logits * self.one)
        logits = torch.zeros(*input_ids.shape, len(VOCAB), dtype=torch.float64, device=input_ids.device)
        logits[:, :, VOCAB.index("yes")] = (ids_ * mask).cumsum(1)
        logits[:, :, VOCAB.index("no")] = ids_
        return SimpleNamespace(logits=logits[:, -logits_to_keep:] * self.one)


def causal(**kwargs) -> PointwiseScorer:
    return PointwiseScorer(FakeModel(), tokenizer(), "causal-yes", **kwargs)


def causal_score(query: str, passage: str) -> float:
    """The causal fake's score of the plain prompt (no chat template), hand-written: the last token is ':'."""
    return sum(ids(f"Query: {query}\nDocument: {passage}{QUESTION}\nAnswer:")) - VOCAB.index(":")


def test_causal_scores_are_yes_minus_no_at_the_last_token_of_left_padded_rows():
    scorer = causal()
    docs = [("alpha", "river"), ("", "book  \n city"), ("beta", "who wrote")]
    scores = scorer.scores("who wrote it ?", docs)
    assert scores.dtype == torch.float32 and scores.requires_grad
    assert scores.tolist() == [causal_score("who wrote it ?", p) for p in ("alpha: river", "book city",
                                                                             "beta: who wrote")]
    assert scorer.tokenizer.padding_side == "left"
    call = scorer.model.calls[0]
    assert call["keep"] == 1 and call["rows"] == 3
    assert call["ids"][2][0] == VOCAB.index("Query")  # the longest row: no [BOS], the prompt as it is
    assert call["ids"][1][:3] == [0, 0, VOCAB.index("Query")]  # "book city", two tokens shorter, padded on the left


def test_a_chat_template_wraps_the_question_as_one_user_turn():
    scorer = causal()
    scorer.tokenizer.chat_template = ("{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}</u>{% endfor %}"
                                      "{% if add_generation_prompt %}<a>{% endif %}")
    text = f"<user>Query: who\nDocument: river{QUESTION}</u><a>"
    assert scorer.scores("who", [("", "river")]).tolist() == [sum(ids(text)) - VOCAB.index(">")]


def test_batches_of_batch_size_give_the_one_by_one_scores():
    docs = [("", w) for w in ("alpha", "beta", "river", "city", "book")]
    scorer = causal(batch_size=2)
    scores = scorer.scores("who", docs).tolist()
    assert [c["rows"] for c in scorer.model.calls] == [2, 2, 1]
    assert scores == [causal_score("who", w) for _, w in docs]
    default = causal()
    assert default.scores("who", [("", "river")] * 17).tolist() == [causal_score("who", "river")] * 17
    assert [c["rows"] for c in default.model.calls] == [16, 1]


def test_no_documents_is_an_empty_tensor():
    assert causal().scores("who", []).shape == (0,)


def test_inputs_and_the_empty_result_are_on_the_model_s_device():
    scorer = PointwiseScorer(FakeModel().to("meta"), tokenizer(), "causal-yes")  # meta: a device that is not cpu
    assert scorer.scores("who", [("", "river")]).device.type == "meta"
    assert scorer.model.calls[0]["device"] == "meta"
    assert scorer.scores("who", []).device.type == "meta"


def test_passages_are_cut_to_their_token_budget():
    # "river,city" is one word but three tokens: the tokenizer's budget keeps "river ," (its tokens decoded)
    assert causal(max_passage_tokens=2).scores("who", [("alpha", "river,city")]).tolist() == [
        causal_score("who", "alpha: river ,")]
    long = " ".join(["city"] * 301)
    assert causal().scores("who", [("", long)]).tolist() == [causal_score("who", " ".join(["city"] * 300))]


def test_a_tokenizer_without_pad_pads_with_eos():
    scorer = PointwiseScorer(FakeModel(), tokenizer(pad=False), "causal-yes")
    assert scorer.tokenizer.pad_token == "[EOS]"
    scorer.scores("who", [("", "river"), ("", "river city")])
    assert scorer.model.calls[0]["ids"][0][0] == VOCAB.index("[EOS]")


@pytest.mark.parametrize(("labels", "expected"), [(1, lambda n, s: n), (2, lambda n, s: s - n)])
def test_cross_encoder_scores_one_logit_or_the_second_minus_the_first(labels, expected):
    scorer = PointwiseScorer(FakeModel(labels), tokenizer(), "seqcls", batch_size=2)
    assert scorer.model.config.pad_token_id == 0  # set from the tokenizer: a real model needs it to batch
    docs = [("alpha", "river"), ("", "city"), ("beta", "book river")]
    pairs = [ids("who ? alpha: river"), ids("who ? city"), ids("who ? beta: book river")]
    want = [expected(len(p) + 1, sum(p) + VOCAB.index("[BOS]")) for p in pairs]
    scores = scorer.scores("who ?", docs)
    assert scores.dtype == torch.float32 and scores.tolist() == want


def test_cross_encoder_pairs_are_cut_in_the_passage_to_budget_plus_128_at_most_512():
    scorer = PointwiseScorer(FakeModel(1), tokenizer(), "seqcls", max_passage_tokens=4)
    query = " ".join(["who"] * 130)  # [BOS] + 130 + the passage's 4 tokens, cut to 4 + 128
    assert scorer.scores(query, [("alpha", "river city book")]).tolist() == [132.0]
    wide = PointwiseScorer(FakeModel(1), tokenizer(), "seqcls", max_passage_tokens=400)
    assert wide.scores(" ".join(["who"] * 508), [("", "river city book alpha")]).tolist() == [512.0]


def test_a_cross_encoder_keeps_its_own_pad_id_and_a_causal_model_is_left_alone():
    assert PointwiseScorer(FakeModel(1, pad_token_id=7), tokenizer(), "seqcls").model.config.pad_token_id == 7
    bare = FakeModel(1)
    bare.config = SimpleNamespace()
    assert PointwiseScorer(bare, tokenizer(), "seqcls").model.config.pad_token_id == 0
    assert causal().model.config.pad_token_id is None


def test_an_unknown_kind_is_refused():
    with pytest.raises(RearankError, match=r"^unknown scorer kind 'rank'; choose one of seqcls, causal-yes$"):
        PointwiseScorer(FakeModel(), tokenizer(), "rank")


def test_the_backend_answers_each_prompt_with_its_score_grouped_by_consecutive_query():
    backend = ScorerBackend(causal())
    assert backend.answer_format(SimpleNamespace(name="pointwise")) is backend
    pairs = [("who", "", "river"), ("who", "alpha", "city"), ("it", "", "book"), ("who", "", "beta")]
    out = backend.generate([Prompt((), pair=p) for p in pairs], SamplingSettings())
    assert [g.text for g in out] == [repr(float(causal_score(q, f"{t}: {x}" if t else x))) for q, t, x in pairs]
    assert {(g.prompt_tokens, g.completion_tokens) for g in out} == {(0, 0)}
    assert [c["rows"] for c in backend.scorer.model.calls] == [2, 1, 1]
    with pytest.raises(RearankError, match=r"^the scorer backend got a prompt without a \(query, passage\) pair; it "
                                           r"scores the prompts of --method pointwise only$"):
        backend.generate([Prompt((), pair=pairs[0]), Prompt(())], SamplingSettings())


def test_the_backend_refuses_other_methods():
    backend = ScorerBackend(causal())
    with pytest.raises(RearankError, match=r"use it with --method pointwise, not 'listwise'$"):
        backend.answer_format(SimpleNamespace(name="listwise"))
    with pytest.raises(RearankError, match=r", not 'bare'$"):
        backend.answer_format("bare")


def test_the_backend_loads_the_embedded_model_by_default(monkeypatch):
    seen = []
    monkeypatch.setattr(PointwiseScorer, "load", classmethod(lambda cls, *a, **kw: seen.append((a, kw)) or "s"))
    assert ScorerBackend().scorer == "s"
    ScorerBackend("m", kind="seqcls", device="cpu", num_layers=1, max_passage_tokens=5, batch_size=3,
                  trust_remote_code=True)
    assert seen == [(("embedded", None), {"device": None, "num_layers": None, "max_passage_tokens": None,
                                          "batch_size": 16, "trust_remote_code": False}),
                    (("m", "seqcls"), {"device": "cpu", "num_layers": 1, "max_passage_tokens": 5, "batch_size": 3,
                                       "trust_remote_code": True})]


# --- load and save ------------------------------------------------------------------------------------------


def test_load_reads_the_kind_from_the_architecture_in_float32_eval_mode(tiny_model, tmp_path):  # noqa: F811
    import transformers
    from transformers import LlamaForCausalLM, LlamaForSequenceClassification

    def saved(model, name):  # the model beside the tiny model's tokenizer
        model.save_pretrained(tmp_path / name)
        transformers.AutoTokenizer.from_pretrained(tiny_model).save_pretrained(tmp_path / name)
        return tmp_path / name

    scorer = PointwiseScorer.load(saved(LlamaForCausalLM.from_pretrained(tiny_model, dtype=torch.float16), "half"))
    assert (scorer.kind, scorer.max_passage_tokens, scorer.batch_size) == ("causal-yes", 300, 16)
    assert {p.dtype for p in scorer.model.parameters()} == {torch.float32} and not scorer.model.training
    assert scorer.device.type == "cpu"
    cls = saved(LlamaForSequenceClassification.from_pretrained(tiny_model, num_labels=1), "cls")
    seqcls = PointwiseScorer.load(cls, device="cpu", max_passage_tokens=9, batch_size=4)
    assert (seqcls.kind, seqcls.max_passage_tokens, seqcls.batch_size) == ("seqcls", 9, 4)
    assert type(seqcls.model).__name__ == "LlamaForSequenceClassification"


def test_save_writes_the_kind_and_budget_and_load_reads_them_back(tiny_model, tmp_path):  # noqa: F811
    scorer = PointwiseScorer.load(tiny_model, device="cpu", max_passage_tokens=7)
    out = tmp_path / "saved"
    PointwiseScorer(scorer.model, scorer.tokenizer, "causal-yes", max_passage_tokens=5).save(out)
    scorer.save(out)  # replaces the first one
    assert (out / "rearank_scorer.json").read_text(encoding="utf-8") == (
        '{\n  "kind": "causal-yes",\n  "max_passage_tokens": 7\n}\n')
    again = PointwiseScorer.load(out, device="cpu")
    assert (again.kind, again.max_passage_tokens) == ("causal-yes", 7)
    assert PointwiseScorer.load(out, device="cpu", max_passage_tokens=3).max_passage_tokens == 3
    (out / "rearank_scorer.json").write_text('{"kind": "seqcls"}', encoding="utf-8")
    assert PointwiseScorer.load(out, device="cpu").kind == "seqcls"  # the saved kind wins over the architecture
    assert PointwiseScorer.load(out, "causal-yes", device="cpu").kind == "causal-yes"  # and the caller's over it


def test_num_layers_keeps_the_first_layers_between_one_and_all(tiny_model):  # noqa: F811
    assert len(PointwiseScorer.load(tiny_model, device="cpu", num_layers=1).model.model.layers) == 1
    assert len(PointwiseScorer.load(tiny_model, device="cpu", num_layers=2).model.model.layers) == 2
    for bad in (0, 3):
        with pytest.raises(RearankError, match=rf"^num_layers must be between 1 and the model's 2 layers, got {bad}$"):
            PointwiseScorer.load(tiny_model, device="cpu", num_layers=bad)


def test_load_errors_name_the_scorer(tiny_model, tmp_path, monkeypatch):  # noqa: F811
    with pytest.raises(RearankError, match=rf"^cannot load scorer '{tmp_path}': .*Pass a local folder, a saved "
                                           r"scorer, a reachable hub id, or 'embedded'$"):
        PointwiseScorer.load(str(tmp_path))
    (tmp_path / "config.json").write_bytes((tiny_model / "config.json").read_bytes())
    with pytest.raises(RearankError, match=rf"^cannot load scorer '{tmp_path}' as causal-yes: "):
        PointwiseScorer.load(str(tmp_path))
    config = json.loads((tiny_model / "config.json").read_text())
    for archs, shown in ((["LlamaModel", "Other"], "'LlamaModel Other'"), (None, "''")):
        (tmp_path / "config.json").write_text(json.dumps({**config, "architectures": archs}))
        with pytest.raises(RearankError, match=rf"^cannot tell the scorer kind of architectures {shown}; pass kind="):
            PointwiseScorer.load(str(tmp_path))
    monkeypatch.setitem(sys.modules, "transformers", None)
    with pytest.raises(RearankError, match=r"^pointwise scorers need torch and transformers .*`rearank\[hf\]`$"):
        PointwiseScorer.load(tiny_model)


def test_load_passes_the_source_and_options_to_transformers(tiny_model, tmp_path, monkeypatch):  # noqa: F811
    import transformers

    config = transformers.AutoConfig.from_pretrained(tiny_model)
    tok = transformers.AutoTokenizer.from_pretrained(tiny_model)
    calls = []

    class Model(FakeModel):
        def to(self, device):
            calls.append(("to", device))
            return self

    def fake(name, result):
        def from_pretrained(path, **kwargs):
            calls.append((name, path, kwargs))
            return result
        return from_pretrained

    monkeypatch.setattr(scorer_module, "resolve_model",
                        lambda name: ModelSource("/src/embedded" if name is None else f"/src/{name}", "m.gguf"))
    monkeypatch.setattr(transformers.AutoConfig, "from_pretrained", fake("config", config))
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", fake("tokenizer", tok))
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", fake("model", Model()))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    PointwiseScorer.load(None, num_layers=1, trust_remote_code=True)
    gguf = {"gguf_file": "m.gguf", "trust_remote_code": True}
    assert calls == [("config", "/src/embedded", gguf), ("tokenizer", "/src/embedded", gguf),
                     ("model", "/src/embedded", {**gguf, "dtype": torch.float32, "num_hidden_layers": 1}),
                     ("to", "cuda")]
    calls.clear()
    monkeypatch.chdir(tmp_path)  # a folder named "embedded" here is not the embedded model's
    (tmp_path / "embedded").mkdir()
    (tmp_path / "embedded" / "rearank_scorer.json").write_text('{"kind": "seqcls", "max_passage_tokens": 5}')
    scorer = PointwiseScorer.load("embedded", device="cpu")
    assert [c[2]["trust_remote_code"] for c in calls[:3]] == [False] * 3 and calls[3] == ("to", "cpu")
    assert (scorer.kind, scorer.max_passage_tokens) == ("causal-yes", 300)
    monkeypatch.setattr(transformers.AutoConfig, "from_pretrained",
                        fake("config", SimpleNamespace(architectures=["LlamaForCausalLM"])))
    with pytest.raises(RearankError, match=r"^num_layers must be between 1 and the model's None layers, got 1$"):
        PointwiseScorer.load("x", num_layers=1)
