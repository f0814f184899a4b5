"""The one table of the verl recipes the checks run: each stage's recipe file, its data, lengths on CPU, the
``--recipe`` names of ``make train-cpu`` and the QA samples of the RAG checks."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from recipes import RECIPES_DIR

#: QA samples under ``$REARANK_DATA``: HotpotQA training questions (synthesis) and dev questions (the export at work).
QA = "qa/hotpotqa/train_distractor.sample100.json"
QA_EVAL = "qa/hotpotqa/dev_distractor.first103.json"
MUSIQUE = "qa/musique/train_ans.sample100.json"


@dataclass(frozen=True)
class Smoke:
    """A stage's TRL GRPO run of ``make train-smoke``: its defaults (steps, tokens a completion, sampling
    temperature, learning rate), the reward parts it logs and its table's columns (header, metric, width)."""

    steps: int
    max_completion_length: int
    temperature: float
    learning_rate: float
    parts: tuple[str, ...]
    table: tuple[tuple[str, str, int], ...]


@dataclass(frozen=True)
class Stage:
    """One verl run: its recipe file, the ``rearank synth`` arguments of its data, and lengths for CPU."""

    name: str
    #: The method card whose reward the recipe trains with and whose example completions the checks score.
    card: str
    recipe: str
    synth: tuple[str, ...]
    prompt_tokens: int
    response_tokens: int
    #: Steps 3-5 of ``make train-cpu`` (resume, export, use) too; False: the GRPO steps alone.
    full: bool = True
    #: RAG stages: the QA samples ``make train-check`` makes the card's rows from (empty: not a RAG check).
    check_qa: tuple[str, ...] = ()
    #: ``make train-smoke --family NAME`` (None: not a smoke family).
    smoke: Smoke | None = None

    @property
    def variants(self) -> tuple[str, str]:
        """The recipe and its one-GPU debug variant."""
        return self.recipe, f"{self.recipe}_debug"

    @property
    def reward(self) -> tuple[str, str]:
        """``reward.custom_reward_function`` (path, name) as the recipe file sets it."""
        return _reward(self.recipe)


@cache
def _reward(recipe: str) -> tuple[str, str]:
    from omegaconf import OmegaConf

    reward = OmegaConf.load(RECIPES_DIR / f"{recipe}.yaml").reward.custom_reward_function
    return str(reward.path), str(reward.name)


_RANK_SYNTH = ("--samples-per-query", "1", "--set-size", "5", "--passage-budget", "200c")
STAGES = {
    "rearank": Stage("rearank", "listwise", "rearank/grpo", ("--dataset", "dl21", *_RANK_SYNTH), 1024, 64,
                     smoke=Smoke(3, 32, 1.0, 1e-5, ("ndcg", "r_rank", "format_tags", "format_answer"),
                                 (("ndcg", "rearank/ndcg", 6), ("r_rank", "rearank/r_rank", 7)))),
    "grouprank": Stage("grouprank", "groupwise", "grouprank/grpo", ("--dataset", "dl21", "--method", "groupwise", *_RANK_SYNTH),
                       1024, 64),
    "reasonrank": Stage("reasonrank", "reasonrank", "reasonrank/grpo",
                        ("--dataset", "dl21", "--method", "reasonrank", "--teacher", "oracle", *_RANK_SYNTH), 1024, 64,
                        full=False),
    "barrag_selector": Stage("barrag_selector", "barrag-selector", "barrag/selector_grpo",
                             ("--method", "barrag-selector", "--qa", f"{{data}}/{QA}", "--qa-limit", "20"), 4096, 64,
                             check_qa=(QA,)),
    "barrag_generator": Stage("barrag_generator", "barrag-generator", "barrag/generator_grpo",
                              ("--method", "barrag-generator", "--qa", f"{{data}}/{QA}", "--qa-limit", "20"), 2048, 64,
                              check_qa=(QA,)),
    "arena": Stage("arena", "arena", "arena/grpo", ("--method", "arena", "--qa", f"{{data}}/{QA}", "--qa-limit", "20"), 4096, 64,
                   check_qa=(QA, MUSIQUE),
                   smoke=Smoke(2, 48, 0.9, 3e-6, ("format", "accuracy", "relevance"),
                               (("format", "arena/format", 7), ("relev", "arena/relevance", 6)))),
}
#: ``make train-cpu``'s ``--recipe`` names: a recipe runs its stages in order.
RECIPES = {**{name: (name,) for name in STAGES}, "barrag": ("barrag_selector", "barrag_generator")}
DEFAULT = ("rearank", "grouprank", "barrag", "arena")
#: The RAG stages ``make train-check`` checks (selector, generator, ARENA).
RAG_STAGES = tuple(stage for stage in STAGES.values() if stage.check_qa)


def stage_of_reward(path: str, name: str) -> Stage | None:
    """The stage whose recipe scores with this ``custom_reward_function`` (None: none of the table's)."""
    return next((stage for stage in STAGES.values() if stage.reward == (path, name)), None)

