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
#   grouprank_sft                            recipes/grouprank/sft.yaml alone (torchrun, GPUS_PER_NODE processes)
#   reasonrank, reasonrank_debug, reasonrank_sft   recipes/reasonrank/ alike (ReasonRank: SFT, then GRPO from it via
#                                            REASONRANK_SFT_MODEL; docs/reasonrank.md)
#   barrag_selector[_debug], barrag_generator[_debug]   recipes/barrag/*.yaml  (one BAR-RAG stage each)
#   barrag, barrag_debug                     BAR-RAG's three-iteration loop, resumable (recipes/barrag/loop.py;
#                                            BARRAG_OUT: its folder and state, default runs/barrag)
#   arena, arena_debug                       recipes/arena/grpo{,_debug}.yaml
#   rrpo                                     rearank rag rrpo train --config recipes/rrpo/hotpotqa.yaml
#                                            (under torchrun on several nodes or GPUS_PER_NODE > 1)
#   <folder>/<file>                          any recipe file by its path under recipes/
# Overrides are Hydra overrides for verl recipes and `--set key=value` pairs' values for rrpo.
#
# Environment:
#   REARANK_RL_DATA  folder with train.parquet and val.parquet from `rearank synth` (default: the recipe's own,
#                    e.g. data/rl/dl21 for rearank)
#   CKPT_ROOT        checkpoint root (default ./checkpoints); runs go to CKPT_ROOT/<project>/<experiment>,
#                    and a rerun with the same experiment resumes from the latest checkpoint (resume_mode=auto)
#   PYTHON           interpreter of the GPU environment (default: .venv/bin/python of this checkout, which
#                    `make setup-gpu` builds, else python); printed on every node
#   DRY_RUN=1        print the commands and exit (works without GPUs); with NNODES > 1 and no NODE_RANK, the
#                    torchrun stage's command of every node
#   TRAIN_DEVICE     cuda (default) or cpu: `make train-cpu`'s CPU configuration (recipes/checks/cpu_launch.py: the
#                    tiny model, gloo, the transformers rollout, 2 GRPO steps / 1 SFT step); the tests' cluster runs
#   GPUS_PER_NODE    GPUs a node: torchrun processes of a torchrun stage, trainer.n_gpus_per_node of GRPO (default:
#                    the recipe file's n_gpus_per_node; RRPO 1; TRAIN_DEVICE=cpu 1)
#   NNODES           nodes (default 1): trainer.nnodes of GRPO, which runs on the Ray cluster at RAY_ADDRESS;
#                    torchrun --nnodes of the torchrun stages (SFT, RRPO), which run on every node
#   NODE_RANK, MASTER_ADDR, MASTER_PORT
#                    a torchrun stage on several nodes: this node's rank (default SLURM_NODEID), the rank-0 node's
#                    address and port (29500); one node runs --standalone
#   STAGE            all (default), torchrun (the SFT stage / RRPO only: run it on every node) or ray (GRPO only,
#                    from the SFT folder); `train.sh --stages` prints the recipe's stages, one `file kind` a line
#   RAY_ADDRESS      an existing Ray cluster to join (recipes/launch.sh sets it)
#   ATTN_IMPL        attention kernel: flash_attention_2 when flash-attn imports in PYTHON, else sdpa (which also
#                    turns use_remove_padding off); printed at launch
#   REARANK_DATA     the shared data packs (RRPO's questions; default ../shared/data beside the checkout, else
#                    ~/.cache/rearank/data)
# Every variable a recipe reads with ${oc.env:NAME} (GROUPRANK_SFT_MODEL, BARRAG_READER_URL, ...) that is set here
# goes to every Ray worker through verl's ray_kwargs.ray_init.runtime_env.env_vars, on every node, value intact.
# Several nodes: recipes/launch.sh (make train NNODES=N), under Slurm recipes/slurm/train.sbatch (docs/training.md).
#
# Examples:
#   recipes/train.sh trainer.logger='[console,wandb]'
#   RECIPE=grouprank_debug recipes/train.sh
#   recipes/train.sh trainer.experiment_name=absolute reward.custom_reward_function.reward_kwargs.rank_reward=absolute
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RECIPE=${RECIPE:-rearank}
if [[ -z "${PYTHON:-}" ]]; then
  if [[ -x "$ROOT/.venv/bin/python" ]]; then PYTHON=$ROOT/.venv/bin/python; else PYTHON=python; fi
fi
abspath() { case "$1" in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
die() { echo "train.sh: $*" >&2; exit 2; }
CKPT_ROOT=$(abspath "${CKPT_ROOT:-checkpoints}")
if [[ -z "${REARANK_DATA:-}" ]]; then
  if [[ -d "$ROOT/../shared/data" ]]; then REARANK_DATA=$(cd "$ROOT/../shared/data" && pwd); else REARANK_DATA=$HOME/.cache/rearank/data; fi
fi
REARANK_DATA=$(abspath "$REARANK_DATA")
export REARANK_DATA
NNODES=${NNODES:-1}
NODE_RANK=${NODE_RANK:-${SLURM_NODEID:-}}
TRAIN_DEVICE=${TRAIN_DEVICE:-cuda}
STAGE=${STAGE:-all}
[[ "$NNODES" =~ ^[1-9][0-9]*$ ]] || die "NNODES=$NNODES: a node count (1, 2, ...)"
[[ -z "$NODE_RANK" || ( "$NODE_RANK" =~ ^[0-9]+$ && NODE_RANK -lt NNODES ) ]] \
  || die "NODE_RANK=$NODE_RANK: a node rank from 0 to $((NNODES - 1)) (NNODES=$NNODES)"
[[ -z "${GPUS_PER_NODE:-}" || "$GPUS_PER_NODE" =~ ^[1-9][0-9]*$ ]] || die "GPUS_PER_NODE=$GPUS_PER_NODE: a count (1, 8, ...)"
case "$TRAIN_DEVICE" in
  cuda) ;;
  cpu) GPUS_PER_NODE=${GPUS_PER_NODE:-1} ATTN_IMPL=${ATTN_IMPL:-sdpa}; export VERL_PLATFORM=cpu ;;  # recipes.verl_cpu
  *) die "TRAIN_DEVICE=$TRAIN_DEVICE: cuda or cpu" ;;
esac
case "$STAGE" in all|torchrun|ray) ;; *) die "STAGE=$STAGE: all, torchrun (SFT / RRPO, every node) or ray (GRPO)" ;; esac
NAMES="rearank rearank_debug grouprank grouprank_debug grouprank_sft reasonrank reasonrank_debug reasonrank_sft barrag barrag_debug barrag_selector
barrag_selector_debug barrag_generator barrag_generator_debug arena arena_debug rrpo"

# recipe name -> the recipe files it runs, in order
case "$RECIPE" in
  rearank|arena) files=("$RECIPE/grpo") ;;
  grouprank|reasonrank) files=("$RECIPE/sft" "$RECIPE/grpo") ;;  # the papers' two stages: SFT, then GRPO from it
  rearank_debug|grouprank_debug|reasonrank_debug|arena_debug) files=("${RECIPE%_debug}/grpo_debug") ;;
  grouprank_sft|reasonrank_sft) files=("${RECIPE%_sft}/sft") ;;
  barrag|barrag_debug) files=() ;;  # BAR-RAG's loop, below
  barrag_selector|barrag_generator) files=("barrag/${RECIPE#barrag_}_grpo") ;;
  barrag_selector_debug|barrag_generator_debug) files=("barrag/$(sed 's/^barrag_//; s/_debug$//' <<<"$RECIPE")_grpo_debug") ;;
  rrpo) files=(rrpo/hotpotqa) ;;
  */*) files=("$RECIPE") ;;
  *) die "unknown RECIPE=$RECIPE; one of:" $NAMES "or a path like rearank/grpo" ;;
esac
kind() { [[ "$1" == */sft || "$1" == rrpo/* ]] && echo torchrun || echo ray; }  # $1: a recipe file
if [[ "${1:-}" == --stages ]]; then
  [[ "$RECIPE" == barrag || "$RECIPE" == barrag_debug ]] && echo "barrag/loop ray"
  for file in ${files[@]+"${files[@]}"}; do echo "$file $(kind "$file")"; done
  exit 0
fi
where="node ${NODE_RANK:-0} of $NNODES"
[[ "$NNODES" != 1 && -z "$NODE_RANK" ]] && where="$NNODES nodes, no NODE_RANK"
echo "train.sh: $(hostname), $where, python $PYTHON, TRAIN_DEVICE=$TRAIN_DEVICE," \
  "GPUS_PER_NODE=${GPUS_PER_NODE:-(the recipe file)}" >&2

# BAR-RAG's loop: serve the reader, train the selector, select, synthesize generator rows, train the generator, x3
if [[ "$RECIPE" == barrag || "$RECIPE" == barrag_debug ]]; then
  loop=("$PYTHON" -m recipes.barrag.loop --out "$(abspath "${BARRAG_OUT:-runs/barrag}")")
  [[ "$RECIPE" == barrag_debug ]] && loop+=(--debug)
  [[ "${DRY_RUN:-0}" == 1 ]] && loop+=(--dry-run)
  cd "$ROOT"
  exec "${loop[@]}" "$@"
fi
for file in "${files[@]}"; do
  [[ -f "$ROOT/recipes/$file.yaml" ]] || die "no recipe file $ROOT/recipes/$file.yaml (RECIPE=$RECIPE)"
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
# settings for Ray workers: each ${oc.env:NAME} of the recipe's folder that this shell sets, as verl's runtime_env,
# one override a line (a Hydra quoted string: spaces and quotes kept)
runtime_env() {  # $1: recipe folder under recipes/; $2: only this variable (optional)
  local name value q="'"
  for name in $(grep -ho 'oc.env:[A-Za-z_][A-Za-z0-9_]*' "$ROOT/recipes/$1"/*.yaml | cut -d: -f2 | sort -u); do
    [[ -n "${!name+x}" && ( -z "${2:-}" || "$name" == "$2" ) ]] || continue
    value=${!name}
    echo "++ray_kwargs.ray_init.runtime_env.env_vars.$name='${value//$q/\\$q}'"
  done
  return 0
}
# TRAIN_DEVICE=cpu: the CPU configuration of a recipe file merged with the user's overrides (theirs win)
cpu_overrides() {  # $1: recipe file, $2: data folder, $3...: more options of recipes.checks.cpu_launch, then -- overrides
  local out
  out=$(mktemp)
  (cd "$ROOT" && "$PYTHON" -m recipes.checks.cpu_launch "$@") >"$out" || { rm -f "$out"; exit 2; }
  mapfile -d '' -t overrides <"$out"
  rm -f "$out"
}
# torchrun's node options: one node standalone, else this node's rank (or, in a dry run, every rank: $1)
torchrun_nodes() {  # $1: node rank
  if [[ "$NNODES" == 1 ]]; then
    nodes=(--standalone --nnodes=1)
  else
    nodes=("--nnodes=$NNODES" "--node_rank=$1"
      "--master_addr=${MASTER_ADDR:?set MASTER_ADDR (the address of the rank-0 node) for a $NNODES-node torchrun stage}"
      "--master_port=${MASTER_PORT:-29500}")
  fi
}
if [[ "$NNODES" == 1 ]]; then
  ranks=(0)
elif [[ -n "$NODE_RANK" ]]; then
  ranks=("$NODE_RANK")
elif [[ "${DRY_RUN:-0}" == 1 ]]; then
  ranks=($(seq 0 $((NNODES - 1))))
else
  ranks=()
fi

commands=()  # shell-quoted, run in order
stages=()    # the recipe file of each
needed=()
SFT_DIR=
for file in "${files[@]}"; do
  [[ "$file" == */sft ]] && SFT_DIR="$CKPT_ROOT/sft/${file%/*}"  # GRPO of a two-stage recipe starts from it
  [[ "$STAGE" == all || "$STAGE" == "$(kind "$file")" ]] || continue
  if [[ "$(kind "$file")" == torchrun && ${#ranks[@]} == 0 ]]; then
    die "the torchrun stage ($file) runs on each of the $NNODES nodes: set NODE_RANK (0..$((NNODES - 1))) and" \
      "MASTER_ADDR on each, or let recipes/launch.sh start it (under Slurm: recipes/slurm/train.sbatch)"
  fi
  if [[ "$file" == rrpo/* ]]; then
    sets=()
    # data files named relative to $REARANK_DATA in the recipe file, as absolute paths
    for key in data eval_data; do
      value=$(sed -n "s/^$key: *//p" "$ROOT/recipes/$file.yaml")
      [[ -n "$value" && "$value" != /* && "$value" != null ]] && sets+=(--set "$key=$REARANK_DATA/$value")
    done
    for kv in "$@"; do sets+=(--set "$kv"); done
    rrpo=(-m rearank rag rrpo train --config "$ROOT/recipes/$file.yaml" ${sets[@]+"${sets[@]}"})
    for rank in "${ranks[@]}"; do
      if [[ "$NNODES" == 1 && "${GPUS_PER_NODE:-1}" == 1 ]]; then
        cmd=("$PYTHON" "${rrpo[@]}")  # one process, as the recipe has it
      else  # RRPO's own data parallelism: torchrun's ranks (rearank/rag/rrpo/distributed.py)
        torchrun_nodes "$rank"
        cmd=("$PYTHON" -m torch.distributed.run "${nodes[@]}" "--nproc_per_node=${GPUS_PER_NODE:-1}" "${rrpo[@]}")
      fi
      echo "+ ${cmd[*]@Q}"
      commands+=("$(printf '%q ' "${cmd[@]}")") stages+=("$file")
    done
  elif [[ "$file" == */sft ]]; then
    DATA=$(abspath "${REARANK_RL_DATA:-data/rl/dl21-${file%/sft}}")
    needed+=("$DATA/sft_train.parquet" "$DATA/sft_val.parquet")
    gpus=${GPUS_PER_NODE:-$(sed -n 's/^ *n_gpus_per_node: *\([0-9]*\).*/\1/p' "$ROOT/recipes/$file.yaml")}
    user=()
    [[ "$RECIPE" == *_sft ]] && user=("$@")  # in the two-stage run, overrides go to GRPO
    if [[ "$TRAIN_DEVICE" == cpu ]]; then
      cpu_overrides "$file" --data "$DATA" -- ${user[@]+"${user[@]}"}
      user=(${overrides[@]+"${overrides[@]}"})
    fi
    for rank in "${ranks[@]}"; do
      torchrun_nodes "$rank"
      cmd=("$PYTHON" -m torch.distributed.run "${nodes[@]}" "--nproc_per_node=${gpus:-8}"
        -m verl.trainer.sft_trainer --config-dir "$ROOT/recipes/${file%/*}" --config-name sft
        "data.train_files=$DATA/sft_train.parquet" "data.val_files=$DATA/sft_val.parquet"
        $(attention model) "trainer.nnodes=$NNODES" "trainer.n_gpus_per_node=${gpus:-8}"
        "trainer.default_local_dir=$SFT_DIR" ${user[@]+"${user[@]}"})
      echo "+ ${cmd[*]@Q}"
      commands+=("$(printf '%q ' "${cmd[@]}")") stages+=("$file")
    done
  else
    # the data folder as an absolute path (Ray workers need not share this shell's directory): REARANK_RL_DATA,
    # else the recipe's own default (${oc.env:REARANK_RL_DATA,<default>} in the file or the one it extends)
    default=$(awk 'match($0, /oc.env:REARANK_RL_DATA,[^}]*/) {print substr($0, RSTART + 23, RLENGTH - 23); exit}' \
      "$ROOT/recipes/$file.yaml" "$ROOT/recipes/${file%_debug}.yaml")  # no pipe into head: SIGPIPE under pipefail
    DATA=$(abspath "${REARANK_RL_DATA:-$default}")
    needed+=("$DATA/train.parquet" "$DATA/val.parquet")
    mapfile -t settings < <(runtime_env "${file%/*}")
    user=("$@")
    if [[ "$TRAIN_DEVICE" == cpu ]]; then
      cpu_overrides "$file" --data "$DATA" --nnodes "$NNODES" ${RAY_ADDRESS:+--joins-cluster} \
        ${SFT_DIR:+--from-sft} -- ${user[@]+"${user[@]}"}
      user=(${overrides[@]+"${overrides[@]}"})
    fi
    cmd=("$PYTHON" -m verl.trainer.main_ppo
      --config-dir "$ROOT/recipes/${file%/*}" --config-name "${file#*/}"
      "data.train_files=$DATA/train.parquet" "data.val_files=$DATA/val.parquet" $(attention actor_rollout_ref.model)
      ${settings[@]+"${settings[@]}"} "trainer.nnodes=$NNODES" ${GPUS_PER_NODE:+"trainer.n_gpus_per_node=$GPUS_PER_NODE"}
      "trainer.default_local_dir=$CKPT_ROOT/\${trainer.project_name}/\${trainer.experiment_name}"
      ${user[@]+"${user[@]}"})
    echo "+ ${cmd[*]@Q}"
    commands+=("$(printf '%q ' "${cmd[@]}")") stages+=("$file")
  fi
done
[[ "${DRY_RUN:-0}" == 1 ]] && exit 0

for path in ${needed[@]+"${needed[@]}"}; do
  [[ -f "$path" ]] || die "$path not found; make it with \`rearank synth\` (docs/training.md, docs/rag_training.md)"
done

if [[ "$RECIPE" != rrpo && "$TRAIN_DEVICE" == cuda ]] \
  && ! "$PYTHON" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  die "no CUDA GPU visible to $PYTHON. verl training needs GPUs and a GPU environment (make setup-gpu);" \
    "on CPU run 'make train-cpu RECIPE=$RECIPE', 'make train-check' or TRAIN_DEVICE=cpu (the tiny CPU configuration)."
fi
for i in "${!commands[@]}"; do
  if [[ "$(kind "${stages[$i]}")" == ray && -n "$SFT_DIR" ]]; then
    # GRPO starts from the SFT stage's last checkpoint (recipes/<name>/grpo.yaml reads <NAME>_SFT_MODEL)
    step=$(cat "$SFT_DIR/latest_checkpointed_iteration.txt" 2>/dev/null) \
      || die "no SFT checkpoint in $SFT_DIR; the SFT stage did not finish (STAGE=torchrun runs it)"
    var=$(tr a-z A-Z <<<"${stages[$i]%%/*}")_SFT_MODEL
    export "$var=$SFT_DIR/global_step_$step/huggingface"
    echo "+ $var=${!var}"
    # to every Ray worker, on every node (verl resolves the recipe's ${oc.env:<NAME>_SFT_MODEL} in them)
    commands[$i]+=" $(printf '%q' "$(runtime_env "${stages[$i]%%/*}" "$var")")"
  fi
  eval "${commands[$i]}"
done
