"""``rearank benchmark --ablation reasoning``: the suite with reasoning off and on (and think budgets) on one backend,
one table with paired significance, and the plot; here with the oracle on three dl19 queries."""

from __future__ import annotations

import json

import pytest

from benchmark.ablation import parse_budgets, variants
from rearank.cli import main
from rearank.errors import RearankError
from tests.conftest import require_pack


def test_one_command_runs_both_settings_and_writes_the_table_and_the_plot(tmp_path, capsys):
    require_pack("msmarco-v1-passage/dl19")
    out = tmp_path / "ablation"
    argv = ["benchmark", "--suite", "dl19", "--backend", "oracle", "--ablation", "reasoning", "--max-queries", "3",
            "--top-k", "20", "--output-dir", str(out), "--no-progress"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    table = [line for line in printed.splitlines() if line.startswith("| ")]
    assert table[0].startswith("| Reasoning | Think budget | DL19 | Mean | Tokens/query | s/query | Delta vs off")
    off, on = (line.split(" | ") for line in table[2:])
    assert off[0] == "| off" and on[0] == "| on" and on[6] == "+0.00"  # the oracle ranks alike either way
    assert float(on[4]) > float(off[4])  # the reasoning costs tokens
    assert (out / "reasoning_ablation.md").read_text().strip() in printed
    assert (out / "reasoning_ablation.png").read_bytes().startswith(b"\x89PNG")
    for name, reasoning in (("off", False), ("on", True)):
        assert json.loads((out / name / "suite.json").read_text())["reasoning"] is reasoning
    # finished variants are kept on --resume; the ablation owns the switch
    assert main([*argv, "--resume"]) == 0
    assert main([*argv, "--resume", "--reasoning", "on"]) == 2


def test_variants_and_think_budgets():
    assert [(v.name, v.reasoning, v.think_budget) for v in variants([1024, 256, 256])] == [
        ("off", False, None), ("on", True, None), ("on-think-256", True, 256), ("on-think-1024", True, 1024)]
    assert parse_budgets("256,1024") == [256, 1024] and parse_budgets(None) == []
    for bad in ("0", "a,b", ","):
        with pytest.raises(RearankError, match="positive token counts"):
            parse_budgets(bad)
