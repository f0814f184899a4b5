#!/usr/bin/env bash
# Training on GPUs with one command (`make train RECIPE=<name>` runs this). Prints every command it runs.
#
#   RECIPE=<name> recipes/train.sh [overrides...]
#
# RECIPE (default rearank); the verl recipes are recipes/<folder>/<file>.yaml, run by verl.trainer.main_ppo:
#   rearank, rearank_debug                   recipes/rearank/grpo{,_debug}.yaml        (listwise, Rearank)
#   grouprank                                recipes/grouprank/sft.yaml then grpo.yaml (GroupRank: SFT cold start,
#                                            then GRPO from its last checkpoint, via GROUPRANK_SFT_MODEL)
#   grouprank_debug                          recipes/grouprank/grpo_debug.yaml
#   grouprank_sft                            recipes/grouprank/sft.yaml alone (torchrun, N_GPUS processes)
#   reasonrank, reasonrank_debug, reasonrank_sft   recipes/reasonrank/ alike (ReasonRank: SFT, then GRPO from it via
#                                            REASONRANK_SFT_MODEL; docs/reasonrank.md)
#   barrag_selector[_debug], barrag_generator[_debug]   recipes/barrag/*.yaml  (one BAR-RAG stage each)
#   barrag, barrag_debug                     BAR-RAG's three-iteration loop, resumable (recipes/barrag/loop.py;
#                                            BARRAG_OUT: its folder and state, default runs/barrag)
#   arena, arena_debug                       recipes/arena/grpo{,_debug}.yaml
#   rrpo                                     rearank rag rrpo train --config recipes/rrpo/hotpotqa.yaml
#   <folder>/<file>                          any recipe file by its path under recipes/
# Overrides are Hydra overrides for verl recipes and `--set key=value` pairs' values for rrpo.
#
# Environment:
#   REARANK_RL_DATA  folder with train.parquet and val.parquet from `rearank synth` (default: the recipe's own,
#                    e.g. data/rl/dl21 for rearank)
#   CKPT_ROOT        checkpoint root (default ./checkpoints); runs go to CKPT_ROOT/<project>/<experiment>,
#                    and a rerun with the same experiment resumes from the latest checkpoint (resume_mode=auto)
#   PYTHON           interpreter of the GPU environment (default python)
#   DRY_RUN=1        print the commands and exit (works without GPUs)
#   N_GPUS           GPUs (torchrun processes) of the GroupRank SFT stage per node (default 8; its SFT checkpoints
#                    go to CKPT_ROOT/sft/grouprank)
#   NNODES, NODE_RANK, MASTER_ADDR, MASTER_PORT
#                    the GroupRank SFT stage on several nodes: torchrun --nnodes=NNODES --node_rank=NODE_RANK
#                    --master_addr=MASTER_ADDR (run RECIPE=grouprank_sft on every node; default one node, standalone)
#   RAY_ADDRESS      an existing Ray cluster to join (recipes/launch_multinode.sh sets it)
#   ATTN_IMPL        attention kernel: flash_attention_2 when flash-attn imports in PYTHON, else sdpa (which also
#                    turns use_remove_padding off); printed at launch
#   REARANK_DATA     the shared data packs (RRPO's questions; default ../shared/data beside the checkout, else
#                    ~/.cache/rearank/data)
# Every variable a recipe reads with ${oc.env:NAME} (GROUPRANK_SFT_MODEL, BARRAG_READER_URL, ...) that is set here
# goes to every Ray worker through verl's ray_kwargs.ray_init.runtime_env.env_vars, on every node.
#
# Examples:
#   recipes/train.sh trainer.logger='[console,wandb]'
#   RECIPE=grouprank_debug recipes/train.sh
#   recipes/train.sh trainer.experiment_name=absolute reward.custom_reward_function.reward_kwargs.rank_reward=absolute
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RECIPE=${RECIPE:-rearank}
PYTHON=${PYTHON:-python}
abspath() { case "$1" in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
CKPT_ROOT=$(abspath "${CKPT_ROOT:-checkpoints}")
if [[ -z "${REARANK_DATA:-}" ]]; then
  if [[ -d "$ROOT/../shared/data" ]]; then REARANK_DATA=$(cd "$ROOT/../shared/data" && pwd); else REARANK_DATA=$HOME/.cache/rearank/data; fi
fi
REARANK_DATA=$(abspath "$REARANK_DATA")
export REARANK_DATA
NNODES=${NNODES:-1}
NAMES="rearank rearank_debug grouprank grouprank_debug grouprank_sft reasonrank reasonrank_debug reasonrank_sft barrag barrag_debug barrag_selector
barrag_selector_debug barrag_generator barrag_generator_debug arena arena_debug rrpo"

# BAR-RAG's loop: serve the reader, train the selector, select, synthesize generator rows, train the generator, x3
if [[ "$RECIPE" == barrag || "$RECIPE" == barrag_debug ]]; then
  loop=("$PYTHON" -m recipes.barrag.loop --out "$(abspath "${BARRAG_OUT:-runs/barrag}")")
  [[ "$RECIPE" == barrag_debug ]] && loop+=(--debug)
  [[ "${DRY_RUN:-0}" == 1 ]] && loop+=(--dry-run)
  cd "$ROOT"
  exec "${loop[@]}" "$@"
fi

# recipe name -> the recipe files it runs, in order
case "$RECIPE" in
  rearank|arena) files=("$RECIPE/grpo") ;;
  grouprank|reasonrank) files=("$RECIPE/sft" "$RECIPE/grpo") ;;  # the papers' two stages: SFT, then GRPO from it
  rearank_debug|grouprank_debug|reasonrank_debug|arena_debug) files=("${RECIPE%_debug}/grpo_debug") ;;
  grouprank_sft|reasonrank_sft) files=("${RECIPE%_sft}/sft") ;;
  barrag_selector|barrag_generator) files=("barrag/${RECIPE#barrag_}_grpo") ;;
  barrag_selector_debug|barrag_generator_debug) files=("barrag/$(sed 's/^barrag_//; s/_debug$//' <<<"$RECIPE")_grpo_debug") ;;
  rrpo) files=(rrpo/hotpotqa) ;;
  */*) files=("$RECIPE") ;;
  *) echo "train.sh: unknown RECIPE=$RECIPE; one of:" $NAMES "or a path like rearank/grpo" >&2; exit 2 ;;
esac
for file in "${files[@]}"; do
  if [[ ! -f "$ROOT/recipes/$file.yaml" ]]; then
    echo "train.sh: no recipe file $ROOT/recipes/$file.yaml (RECIPE=$RECIPE)" >&2
    exit 2
  fi
done

# attention kernel: flash-attn when it imports (verl's default), else PyTorch's SDPA, which cannot take packed
# sequences (use_remove_padding)
if [[ -n "${ATTN_IMPL:-}" ]]; then
  why="ATTN_IMPL"
elif "$PYTHON" -c "import flash_attn" 2>/dev/null; then
  ATTN_IMPL=flash_attention_2 why="flash-attn imports in $PYTHON"
else
  ATTN_IMPL=sdpa why="flash-attn does not import in $PYTHON"
fi
echo "train.sh: attention $ATTN_IMPL ($why; set ATTN_IMPL= to choose)" >&2
attention() {  # $1: the config prefix of the model (actor_rollout_ref.model or model)
  echo "$1.override_config.attn_implementation=$ATTN_IMPL"
  [[ "$ATTN_IMPL" == flash_attention_2 ]] || echo "$1.use_remove_padding=false"
}
# settings for Ray workers: each ${oc.env:NAME} of the recipe's folder that this shell sets, as verl's runtime_env
runtime_env() {  # $1: recipe folder under recipes/
  local name
  for name in $(grep -ho 'oc.env:[A-Za-z_][A-Za-z0-9_]*' "$ROOT/recipes/$1"/*.yaml | cut -d: -f2 | sort -u); do
    [[ -n "${!name+x}" ]] || continue
    value=${!name}
    q="'"
    echo "++ray_kwargs.ray_init.runtime_env.env_vars.$name='${value//$q/\\$q}'"  # a Hydra quoted string
  done
  return 0
}

commands=()
needed=()
for file in "${files[@]}"; do
  if [[ "$file" == rrpo/* ]]; then
    sets=()
    # data files named relative to $REARANK_DATA in the recipe file, as absolute paths
    for key in data eval_data; do
      value=$(sed -n "s/^$key: *//p" "$ROOT/recipes/$file.yaml")
      [[ -n "$value" && "$value" != /* && "$value" != null ]] && sets+=(--set "$key=$REARANK_DATA/$value")
    done
    for kv in "$@"; do sets+=(--set "$kv"); done
    cmd=("$PYTHON" -m rearank rag rrpo train --config "$ROOT/recipes/$file.yaml" ${sets[@]+"${sets[@]}"})
  elif [[ "$file" == */sft ]]; then
    DATA=$(abspath "${REARANK_RL_DATA:-data/rl/dl21-${file%/sft}}")
    needed+=("$DATA/sft_train.parquet" "$DATA/sft_val.parquet")
    SFT_DIR="$CKPT_ROOT/sft/${file%/*}"
    if [[ "$NNODES" == 1 ]]; then
      nodes=(--standalone --nnodes=1)
    else
      : "${MASTER_ADDR:?set MASTER_ADDR (the address of the rank-0 node) and NODE_RANK for a $NNODES-node SFT stage}"
      nodes=("--nnodes=$NNODES" "--node_rank=${NODE_RANK:?set NODE_RANK (0..$((NNODES - 1))) on every node}"
        "--master_addr=$MASTER_ADDR" "--master_port=${MASTER_PORT:-29500}")
    fi
    cmd=("$PYTHON" -m torch.distributed.run "${nodes[@]}" "--nproc_per_node=${N_GPUS:-8}"
      -m verl.trainer.sft_trainer --config-dir "$ROOT/recipes/${file%/*}" --config-name sft
      "data.train_files=$DATA/sft_train.parquet" "data.val_files=$DATA/sft_val.parquet"
      $(attention model) "trainer.nnodes=$NNODES" "trainer.n_gpus_per_node=${N_GPUS:-8}"
      "trainer.default_local_dir=$SFT_DIR")
    [[ "$RECIPE" == *_sft ]] && cmd+=("$@")  # in the two-stage run, overrides go to GRPO
  else
    # the data folder as an absolute path (Ray workers need not share this shell's directory): REARANK_RL_DATA,
    # else the recipe's own default (${oc.env:REARANK_RL_DATA,<default>} in the file or the one it extends)
    default=$(grep -ho 'oc.env:REARANK_RL_DATA,[^}]*' "$ROOT/recipes/$file.yaml" "$ROOT/recipes/${file%_debug}.yaml" \
      | head -1 | cut -d, -f2)
    DATA=$(abspath "${REARANK_RL_DATA:-$default}")
    data=("data.train_files=$DATA/train.parquet" "data.val_files=$DATA/val.parquet")
    needed+=("$DATA/train.parquet" "$DATA/val.parquet")
    cmd=("$PYTHON" -m verl.trainer.main_ppo
      --config-dir "$ROOT/recipes/${file%/*}" --config-name "${file#*/}"
      "${data[@]}" $(attention actor_rollout_ref.model) $(runtime_env "${file%/*}")
      "trainer.default_local_dir=$CKPT_ROOT/\${trainer.project_name}/\${trainer.experiment_name}"
      "$@")
  fi
  echo "+ ${cmd[*]@Q}"
  commands+=("$(printf '%q ' "${cmd[@]}")")
done
[[ "${DRY_RUN:-0}" == 1 ]] && exit 0

for path in ${needed[@]+"${needed[@]}"}; do
  if [[ ! -f "$path" ]]; then
    echo "train.sh: $path not found; make it with \`rearank synth\` (docs/training.md, docs/rag_training.md)" >&2
    exit 2
  fi
done

if [[ "$RECIPE" != rrpo ]] && ! "$PYTHON" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  echo "train.sh: no CUDA GPU visible to $PYTHON. verl training needs GPUs and a GPU environment" \
    "(pip install 'verl[vllm]==0.9.1' -e .); on CPU run 'make train-cpu RECIPE=$RECIPE' or 'make train-check'." >&2
  exit 2
fi
for i in "${!commands[@]}"; do
  if [[ "${files[$i]}" == */grpo && -n "${SFT_DIR:-}" ]]; then
    # GRPO starts from the SFT stage's last checkpoint (recipes/<name>/grpo.yaml reads <NAME>_SFT_MODEL)
    step=$(cat "$SFT_DIR/latest_checkpointed_iteration.txt" 2>/dev/null) \
      || { echo "train.sh: no SFT checkpoint in $SFT_DIR; the SFT stage did not finish" >&2; exit 2; }
    var=$(tr a-z A-Z <<<"${files[$i]%/grpo}")_SFT_MODEL
    export "$var=$SFT_DIR/global_step_$step/huggingface"
    echo "+ $var=${!var}"
    # to every Ray worker, on every node (verl resolves the recipe's ${oc.env:<NAME>_SFT_MODEL} in them)
    commands[$i]+=" $(printf '%q ' "$(runtime_env "${files[$i]%/grpo}" | grep "$var")")"
  fi
  eval "${commands[$i]}"
done
