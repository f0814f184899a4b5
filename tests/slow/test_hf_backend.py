"""The hf backend on the embedded SmolLM2-135M-Instruct: batching with left padding, token counts, stop reasons."""

from __future__ import annotations

import pytest

from rearank.backends.base import Backend, Prompt, SamplingSettings
from rearank.errors import MissingDataError, RearankError

pytestmark = pytest.mark.slow

PROMPTS = [
    Prompt(messages=({"role": "user", "content": "What is the capital of France?"},)),
    Prompt(messages=({"role": "system", "content": "You answer in one short sentence."},
                     {"role": "user", "content": "Why is the sky blue during the day but red and orange at sunset?"})),
    Prompt(messages=({"role": "user", "content": "Name three colors."},)),
]
GREEDY = SamplingSettings(max_new_tokens=8)  # decoding is slow on a shared CPU: keep outputs short


@pytest.fixture(scope="module")
def backend():
    from rearank.backends.registry import make_backend

    return make_backend("hf", "embedded", batch_size=8)


def test_embedded_model_is_a_cached_safetensors_folder(backend, monkeypatch):
    from rearank.backends import models
    from rearank.backends.models import embedded_model_path

    def no_conversion(*args):
        raise AssertionError("the cached folder should be used, not a new conversion")

    monkeypatch.setattr(models, "_convert_gguf", no_conversion)
    folder = embedded_model_path()
    assert str(folder) == backend.model_path
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        assert (folder / name).is_file(), name
    assert backend.tokenizer.chat_template and backend.device == "cpu"
    assert str(backend.model.dtype) == "torch.float32"
    assert isinstance(backend, Backend)


def test_batched_left_padding_gives_the_one_at_a_time_greedy_text(backend):
    batched = backend.generate(PROMPTS, GREEDY)
    single = [backend.generate([p], GREEDY)[0] for p in PROMPTS]
    assert len({g.prompt_tokens for g in batched}) == len(PROMPTS)  # different lengths: padding was used
    assert [g.text for g in batched] == [g.text for g in single]
    assert [g.prompt_tokens for g in batched] == [g.prompt_tokens for g in single]
    assert [g.completion_tokens for g in batched] == [g.completion_tokens for g in single]
    assert all(g.text.strip() for g in batched)


def test_prompt_tokens_are_the_chat_template_length(backend):
    [gen] = backend.generate(PROMPTS[1:2], SamplingSettings(max_new_tokens=1))
    ids = backend.tokenizer.apply_chat_template(list(PROMPTS[1].messages), add_generation_prompt=True,
                                                tokenize=True, return_dict=True)["input_ids"]
    assert gen.prompt_tokens == len(ids)


def test_finish_reasons_and_completion_counts(backend):
    story = Prompt(messages=({"role": "user", "content": "Write a long story about a dragon."},))
    cut, done = backend.generate([story, PROMPTS[0]], SamplingSettings(max_new_tokens=12))
    assert (cut.finish_reason, cut.completion_tokens) == ("length", 12)
    assert done.finish_reason == "stop" and 0 < done.completion_tokens < 12
    assert "Paris" in done.text
    # The eos token is counted but not part of the text.
    assert done.completion_tokens == len(backend.tokenizer(done.text, add_special_tokens=False)["input_ids"]) + 1


def test_sampling_is_seeded(backend):
    settings = SamplingSettings(max_new_tokens=4, temperature=1.0, seed=7)
    first = backend.generate(PROMPTS[:1], settings)[0].text
    assert backend.generate(PROMPTS[:1], settings)[0].text == first


def test_missing_local_model_is_a_clear_error(tmp_path):
    from rearank.backends.hf import HFBackend

    with pytest.raises(MissingDataError, match="model folder not found"):
        HFBackend(str(tmp_path / "nope"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(RearankError, match="cannot load model"):
        HFBackend(str(tmp_path / "empty"))


def test_thinking_switch_reaches_generation(tmp_path):
    """``-O enable_thinking=false`` on a chat template that has the switch changes the prompt the model reads;
    on one that has none (the embedded model's own), it is refused."""
    from rearank.backends.models import embedded_model_path
    from rearank.backends.registry import make_backend
    from tests.unit.test_thinking_switch import QWEN3_LIKE

    with pytest.raises(RearankError, match="has no thinking switch"):
        make_backend("hf", "embedded", enable_thinking=False)
    folder = tmp_path / "switch"
    folder.mkdir()
    for source in embedded_model_path().iterdir():
        if source.name != "chat_template.jinja":
            (folder / source.name).symlink_to(source)
    (folder / "chat_template.jinja").write_text(QWEN3_LIKE, encoding="utf-8")
    prompt = [Prompt(messages=({"role": "user", "content": "Name three colors."},))]
    one = SamplingSettings(max_new_tokens=1)
    off = make_backend("hf", str(folder), enable_thinking=False)
    [gen_off] = off.generate(prompt, one)
    default = make_backend("hf", str(folder))
    [gen_default] = default.generate(prompt, one)
    extra = len(off.tokenizer("<think></think>", add_special_tokens=False)["input_ids"])
    assert gen_off.prompt_tokens == gen_default.prompt_tokens + extra > gen_default.prompt_tokens
