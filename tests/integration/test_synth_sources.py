"""``rearank synth --dataset dl21,dl19``: one parquet split by query across both packs, per-source counts; the
written prompts pass ``rearank prompt check`` with the template that made them and fail with another."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from rearank.cli import main


@pytest.fixture(scope="module", autouse=True)
def packs_env():
    from tests.conftest import data_root

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("REARANK_DATA", str(data_root()))
        yield


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory):
    from tests.conftest import require_pack

    require_pack("msmarco-v2-passage/dl21")
    require_pack("msmarco-v1-passage/dl19")
    out = tmp_path_factory.mktemp("dl21-dl19")
    code = main(["synth", "--dataset", "dl21,dl19", "--samples-per-query", "3", "--tokenizer", "none", "--quiet",
                 "--output-dir", str(out)])
    assert code == 0
    return out


def test_one_parquet_split_by_query_across_sources(synthesized):
    stats = json.loads((synthesized / "stats.json").read_text())
    sources = stats["sources"]
    assert list(sources) == ["dl21", "dl19"]
    assert sources["dl21"]["queries"] == 53 and sources["dl19"]["queries"] == 43  # judged queries of each pack
    rows = {split: pq.read_table(synthesized / f"{split}.parquet").to_pylist() for split in ("train", "val")}
    for split, split_rows in rows.items():
        by_source = {name: sum(1 for r in split_rows if r["data_source"] == f"rearank/{name}") for name in sources}
        assert by_source == {name: c[f"{split}_sets"] for name, c in sources.items()}
        assert sum(c[f"{split}_queries"] for c in sources.values()) == stats["splits"][split]["queries"]
    train_q = {r["extra_info"]["qid"] for r in rows["train"]}
    val_q = {r["extra_info"]["qid"] for r in rows["val"]}
    assert train_q and val_q and not train_q & val_q
    assert {r["data_source"] for r in rows["val"]} <= {"rearank/dl21", "rearank/dl19"}
    assert "## Sources" in (synthesized / "stats.md").read_text()


def test_prompt_check_identical_with_its_template_and_names_the_difference_otherwise(synthesized, capsys):
    data = str(synthesized / "train.parquet")
    assert main(["prompt", "check", "--template", "rearank", "--data", data, "--dataset", "dl21,dl19"]) == 0
    assert "identical" in capsys.readouterr().out
    assert main(["prompt", "check", "--template", "rearank", "--data", data, "--dataset", "dl21,dl19",
                 "--passage-budget", "300c"]) == 1
    out = capsys.readouterr().out
    assert "different after" in out and "row " in out and "message " in out and "character " in out


def test_repeated_or_empty_dataset_names_are_errors(tmp_path, capsys):
    assert main(["synth", "--dataset", "dl21,,dl19", "--output-dir", str(tmp_path)]) == 2
    assert "distinct pack names" in capsys.readouterr().err
