"""BAR-RAG's loop end to end on CPU (``python -m recipes.barrag.loop --device cpu``): the real verl runs of both
stages through the CPU plugin with the tiny model, one step a stage, the generator served as the reader, the
selector's evidence feeding the generator's rows, one iteration (the three-iteration chaining of models is
tests/unit/test_barrag_loop.py's); then reruns that continue where it stopped."""

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import data_root, require, require_pack

require("verl", "the `train` extra")
require("transfer_queue", "the `train` extra (verl's V1 trainer imports it)")

pytestmark = [pytest.mark.slow, pytest.mark.train_all]


def loop(out):
    proc = subprocess.run([sys.executable, "-m", "recipes.barrag.loop", "--device", "cpu", "--iterations", "1",
                           "--qa-limit", "4", "--out", str(out)], capture_output=True, text=True, check=False,
                          timeout=5400, env={**os.environ, "REARANK_DATA": str(data_root())})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def test_an_iteration_runs_and_a_rerun_continues_where_it_stopped(tmp_path):
    require_pack("qa")
    out = tmp_path / "loop"
    first = loop(out)
    state = json.loads((out / "loop_state.json").read_text())
    stages = ["train_selector", "export_selector", "select", "generator_rows", "train_generator", "export_generator"]
    assert list(state["done"]) == ["selector_rows"] + [f"iter{i}/{s}" for i in (1,) for s in stages]
    assert first.count("[run ]") == 7
    for i in (1,):
        it = out / f"iter{i}"
        for model in ("selector", "generator"):
            assert (it / model / "model" / "config.json").is_file()
            assert (it / model / "checkpoints" / "global_step_1" / "actor").is_dir()
        selections = [json.loads(line) for line in (it / "selections.jsonl").read_text().splitlines()]
        assert selections and all(row["pids"] for row in selections)
        assert (it / "generator_data" / "train.parquet").is_file()
    # the reader was served (the base model, G_0) while the selector trained
    readers = [p.read_text().splitlines()[0] for p in (out / "logs").glob("reader.*.log")]
    assert len(readers) == 1 and "rearank.backends.chat_server --backend hf" in readers[0]

    assert loop(out).count("[run ]") == 0  # finished: the rerun does nothing
    (out / "iter1" / "generator" / "model" / "config.json").unlink()  # as if killed during the last export
    again = loop(out)
    assert again.count("[run ]") == 1 and "[run ] iter1/export_generator" in again
