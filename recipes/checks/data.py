"""What the checks read: the shared data folder (:func:`rearank.data.packs.data_root`) and their RL parquet (a given
folder, ``data/rl/dl21``, or a small fresh synthesis)."""

from __future__ import annotations

from pathlib import Path

from rearank.data.packs import data_root
from rearank.errors import MissingDataError, RearankError

DEFAULT_DATA = Path("data/rl/dl21")
SPLITS = ("train.parquet", "val.parquet")


def shared(relative: str = "") -> Path:
    """``relative`` under the data folder (``$REARANK_DATA``), resolved; missing is a one-line error."""
    path = (data_root() / relative).resolve()
    if not path.exists():
        raise MissingDataError(f"{path} not found: set REARANK_DATA to the shared data folder")
    return path


def synthesize_sets(output_dir: Path, dataset: str = "dl21", **settings: object) -> Path:
    """Sets of ``dataset`` through the data-synthesis pipeline with the embedded model's tokenizer, as
    ``rearank synth --dataset D`` makes them (``settings``: :class:`data_synthesis.SynthConfig`'s fields)."""
    from data_synthesis import SynthConfig, synthesize
    from data_synthesis.tokens import load_tokenizer
    from rearank.data.packs import load_qrels, load_requests

    config = SynthConfig(data_source=f"rearank/{dataset}", **settings)
    synthesize(load_requests(dataset=dataset), load_qrels(dataset), output_dir, config,
               tokenizer=load_tokenizer("embedded"), tokenizer_name="embedded", progress=False)
    return output_dir


def synthesize_small(output_dir: Path, samples_per_query: int = 4, set_size: int = 20,
                     passage_budget: str | None = None, template: str = "rearank", dataset: str = "dl21") -> Path:
    """A few sets per query of ``dataset`` (``--samples-per-query``, ``--set-size``, ``--passage-budget`` (None: the
    template's) and ``--template`` as given)."""
    return synthesize_sets(output_dir, dataset, samples_per_query=samples_per_query, set_size=set_size,
                           template=template, passage_budget=passage_budget)


def rl_data_dir(data: Path | None, scratch: Path) -> Path:
    """``data`` if given, else ``data/rl/dl21`` if synthesized, else a small synthesis into ``scratch``."""
    if data is None and all((DEFAULT_DATA / name).is_file() for name in SPLITS):
        data = DEFAULT_DATA
    if data is None:
        print(f"no {DEFAULT_DATA}/train.parquet: synthesizing a small dl21 set into {scratch}", flush=True)
        data = synthesize_small(scratch)
    for name in SPLITS:
        if not (data / name).is_file():
            raise RearankError(f"{data / name} not found; run `rearank synth --dataset dl21 --output-dir {data}`")
    return data.resolve()
