#!/usr/bin/env bash
# Rearank GRPO training with verl 0.9.1 on GPUs (`make train` runs this). Prints the command it runs.
#
#   recipes/train.sh [hydra overrides...]
#
# Environment:
#   RECIPE           rearank_grpo (Qwen2.5-7B-Instruct, 8 GPUs; default) or rearank_grpo_debug (1 GPU)
#   REARANK_RL_DATA  folder with train.parquet and val.parquet from `rearank synth` (default data/rl/dl21)
#   CKPT_ROOT        checkpoint root (default ./checkpoints); runs go to CKPT_ROOT/<project>/<experiment>,
#                    and a rerun with the same experiment resumes from the latest checkpoint (resume_mode=auto)
#   PYTHON           interpreter of the GPU environment (default python)
#   DRY_RUN=1        print the command and exit (works without GPUs)
#   RAY_ADDRESS      an existing Ray cluster to join (recipes/launch_multinode.sh sets it)
#
# Examples:
#   recipes/train.sh trainer.logger='[console,wandb]'
#   RECIPE=rearank_grpo_debug recipes/train.sh
#   recipes/train.sh trainer.experiment_name=absolute reward.custom_reward_function.reward_kwargs.rank_reward=absolute
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RECIPE=${RECIPE:-rearank_grpo}
PYTHON=${PYTHON:-python}
abspath() { case "$1" in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
DATA=$(abspath "${REARANK_RL_DATA:-data/rl/dl21}")
CKPT_ROOT=$(abspath "${CKPT_ROOT:-checkpoints}")

if [[ ! -f "$ROOT/recipes/$RECIPE.yaml" ]]; then
  echo "train.sh: no recipe $ROOT/recipes/$RECIPE.yaml (RECIPE=rearank_grpo or rearank_grpo_debug)" >&2
  exit 2
fi

cmd=("$PYTHON" -m verl.trainer.main_ppo
  --config-dir "$ROOT/recipes" --config-name "$RECIPE"
  "data.train_files=$DATA/train.parquet"
  "data.val_files=$DATA/val.parquet"
  "trainer.default_local_dir=$CKPT_ROOT/\${trainer.project_name}/\${trainer.experiment_name}"
  "$@")
echo "+ ${cmd[*]@Q}"
[[ "${DRY_RUN:-0}" == 1 ]] && exit 0

for split in train val; do
  if [[ ! -f "$DATA/$split.parquet" ]]; then
    echo "train.sh: $DATA/$split.parquet not found; make it with: rearank synth --dataset dl21 --output-dir $DATA" >&2
    exit 2
  fi
done
if ! "$PYTHON" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  echo "train.sh: no CUDA GPU visible to $PYTHON. verl training needs GPUs and a GPU environment" \
    "(pip install 'verl[vllm]==0.9.1' -e .); on CPU run 'make train-check' or 'make train-smoke'." >&2
  exit 2
fi
exec "${cmd[@]}"
