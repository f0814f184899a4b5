"""recipes/checks' shared pieces: the one table of stages, the completions of known kinds (from the method cards), the
counters reader."""

import json

import pytest

from rearank.backends.metrics import metrics_url, samples
from rearank.methods.card import card
from rearank.methods.listwise.examples import listwise, listwise_expected
from recipes import RECIPES_DIR
from recipes.checks.completions import examples, warm_start_texts
from recipes.checks.table import DEFAULT, RAG_STAGES, RECIPES, STAGES, stage_of_reward


def test_every_recipe_name_runs_known_stages_and_every_stage_has_kinds():
    assert set(DEFAULT) <= set(RECIPES)
    assert {name for names in RECIPES.values() for name in names} == set(STAGES)
    assert RECIPES["barrag"] == ("barrag_selector", "barrag_generator")
    assert all(examples(name).best for name in STAGES)
    assert [stage.name for stage in RAG_STAGES] == ["barrag_selector", "barrag_generator", "arena"]


@pytest.mark.parametrize("name", sorted(STAGES))
def test_a_stage_is_found_by_the_reward_its_recipe_file_names(name):
    stage = STAGES[name]
    assert all((RECIPES_DIR / f"{variant}.yaml").is_file() for variant in stage.variants)
    path, function = stage.reward
    assert path.startswith("pkg://rearank.") and function
    assert stage_of_reward(path, function) is stage
    assert card(stage.card).reward == (path, function)  # the card names the reward its recipe trains with


def test_an_unknown_reward_has_no_stage():
    assert stage_of_reward("pkg://elsewhere.reward", "compute_score") is None


def test_listwise_kinds_and_their_fixed_scores():
    texts = listwise([0, 2, 1])
    assert list(texts) == ["ideal", "presented", "reversed", "garbage"]
    assert texts["ideal"].endswith("<answer>[2] > [3] > [1]</answer>")
    assert texts["reversed"].endswith("<answer>[3] > [2] > [1]</answer>")
    assert [listwise_expected(k, [0, 2, 1]) for k in texts] == [1.0, 0.2, None, 0.0]
    assert listwise_expected("presented", [2, 1, 0]) == 1.0


def test_the_generator_warm_start_never_copies_the_gold_answer():
    truth = json.dumps({"answers": ["Paris"], "supporting": [1, 2]})
    texts = warm_start_texts("barrag_generator", truth)
    assert len(texts) == 4 and not any("Paris" in t for t in texts)
    assert any("Paris" in t for t in examples("barrag_generator").make(json.loads(truth)).values())


def test_the_listwise_warm_start_is_its_check_kinds():
    truth = json.dumps({"labels": [1, 0, 2]})
    assert warm_start_texts("rearank", truth) == list(listwise([1, 0, 2]).values())


def test_counters_are_summed_over_label_sets():
    page = ('# TYPE vllm:prompt_tokens counter\nvllm:prompt_tokens_total{model_name="a"} 10.0\n'
            'vllm:prompt_tokens_total{model_name="b"} 5.0\n')
    assert sum(samples(page)["vllm:prompt_tokens_total"]) == 15.0
    with pytest.raises(ValueError):
        samples("vllm:num_requests_running{ 3\n")


def test_the_metrics_page_sits_at_the_server_root():
    assert metrics_url("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000/metrics"
