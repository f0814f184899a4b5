"""verl GRPO recipes for Rearank: Hydra configs, launch scripts, CPU checks and checkpoint export.

One folder per method (``rearank/``, ``grouprank/``, ``barrag/``, ``arena/``, ``rrpo/``) holds its recipe files
(e.g. ``rearank/grpo.yaml``: Qwen2.5-7B-Instruct, one node of 8 GPUs; ``rearank/grpo_debug.yaml``: one GPU), which
extend verl's ``ppo_trainer`` config; ``train.sh`` and ``launch.sh`` run them,
``python -m recipes.checks.preflight RECIPE`` checks a recipe on CPU before GPUs are booked (``make train-preflight``),
``python -m recipes.checks.check`` checks everything short of GPU work with the installed verl,
``python -m recipes.checks.cpu`` runs real verl GRPO steps of every recipe on CPU through the plugin
``recipes.verl_cpu`` (``make train-cpu``), ``python -m recipes.checks.smoke [--family arena]`` runs a few CPU GRPO
steps with TRL, ``python -m recipes.checks.export`` turns a verl checkpoint into a Hugging Face folder (all in
:mod:`recipes.checks`); ``recipes/gpu/run.sh`` runs the rearank recipe at a tiny size on one GPU machine from an archive
of what that machine lacks (:mod:`recipes.gpu`); ``python -m recipes.learn`` (``make train-learn``) measures whether a verl GRPO run on CPU
learns. See docs/training.md.
"""

from pathlib import Path

RECIPES_DIR = Path(__file__).resolve().parent
