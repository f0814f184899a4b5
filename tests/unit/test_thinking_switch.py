"""The thinking switch (``-O enable_thinking=false``): detected in chat templates, sent to the openai server."""

from rearank.backends.base import has_thinking_switch, thinking_kwargs
from tests.conftest import require

QWEN3_LIKE = ("{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{%- endfor %}"
              "{%- if add_generation_prompt %}<|im_start|>assistant\n"
              "{%- if enable_thinking is defined and enable_thinking is false %}<think></think>{% endif %}"
              "{%- endif %}")
PLAIN = "{%- for m in messages %}{{ m.content }}{%- endfor %}"


def test_switch_is_detected_in_the_template_text():
    assert has_thinking_switch(QWEN3_LIKE)
    assert has_thinking_switch({"default": PLAIN, "tool_use": QWEN3_LIKE})
    assert not has_thinking_switch(PLAIN) and not has_thinking_switch(None)
    assert thinking_kwargs(None) == {} and thinking_kwargs(False) == {"enable_thinking": False}


def test_switch_reaches_a_real_chat_template():
    transformers = require("transformers", "the `hf` extra")
    from rearank.backends.models import resolve_model

    tokenizer = transformers.AutoTokenizer.from_pretrained(resolve_model("embedded").path)
    tokenizer.chat_template = QWEN3_LIKE
    messages = [{"role": "user", "content": "hi"}]
    off = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, **thinking_kwargs(False))
    on = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, **thinking_kwargs(None))
    assert off.endswith("<think></think>") and not on.endswith("</think>")


def test_openai_backend_sends_the_switch_in_extra_body():
    from rearank.backends.openai import OpenAIBackend

    backend = OpenAIBackend("m", base_url="http://127.0.0.1:9/v1", enable_thinking=False,
                            extra_body={"chat_template_kwargs": {"other": 1}, "top_k": 20})
    assert backend.extra_body == {"chat_template_kwargs": {"other": 1, "enable_thinking": False}, "top_k": 20}
    assert OpenAIBackend("m", base_url="http://127.0.0.1:9/v1").extra_body == {}


def test_table4_analysis_switches_thinking_per_mode(monkeypatch, tmp_path):
    import argparse

    import benchmark.run
    from benchmark import analyses

    seen = {}

    def fake_run_suite(args):
        seen[args.label] = (args.template, args.backend_option)
        return object()

    monkeypatch.setattr(benchmark.run, "run_suite", fake_run_suite)
    monkeypatch.setattr(analyses, "reasoning_report", lambda *a: "report\n")
    args = argparse.Namespace(label="m", model=None, backend="openai", backend_option=["timeout_s=5"],
                              out=tmp_path, thinking_switch="on")
    analyses.run_reasoning(args)
    assert seen == {"m reasoning": ("rearank", ["timeout_s=5", "enable_thinking=true"]),
                    "m zero-shot": ("rankgpt", ["timeout_s=5", "enable_thinking=false"])}
    assert not analyses.uses_thinking_switch(argparse.Namespace(thinking_switch="auto", backend="openai"))
    assert not analyses.uses_thinking_switch(argparse.Namespace(thinking_switch="off", backend="hf"))
