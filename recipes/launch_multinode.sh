#!/usr/bin/env bash
# Multi-node Rearank GRPO on a Ray cluster: start Ray on the head, join the workers, then run the trainer.
#
#   head node:       recipes/launch_multinode.sh head                 # prints the address workers join
#   each worker:     HEAD_ADDR=<head-ip>:6379 recipes/launch_multinode.sh worker
#   head node:       NNODES=2 recipes/launch_multinode.sh train [hydra overrides...]
#   any node:        recipes/launch_multinode.sh stop
#
# Every node needs the same GPU environment (pip install 'verl[vllm]==0.9.1' -e .; the reward is loaded as
# pkg://rearank.methods.listwise.reward on the workers) and the same paths for REARANK_RL_DATA and CKPT_ROOT (a shared
# filesystem), because verl's workers read the data and write checkpoints on every node.
# Environment: RAY_PORT (6379), GPUS_PER_NODE (8), NNODES (2), plus everything recipes/train.sh reads.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RAY_PORT=${RAY_PORT:-6379}
GPUS_PER_NODE=${GPUS_PER_NODE:-8}
NNODES=${NNODES:-2}

run() { echo "+ $*"; "$@"; }

case "${1:-}" in
  head)
    run ray start --head --port="$RAY_PORT" --num-gpus="$GPUS_PER_NODE" --dashboard-host=0.0.0.0
    echo "workers join with: HEAD_ADDR=$(hostname -I | awk '{print $1}'):$RAY_PORT $0 worker"
    ;;
  worker)
    : "${HEAD_ADDR:?set HEAD_ADDR=<head-ip>:$RAY_PORT (printed by '$0 head')}"
    run ray start --address="$HEAD_ADDR" --num-gpus="$GPUS_PER_NODE"
    ;;
  train)
    shift
    # verl's main_ppo calls ray.init(), which joins the running cluster at RAY_ADDRESS instead of starting one.
    export RAY_ADDRESS=${RAY_ADDRESS:-auto}
    [[ "${DRY_RUN:-0}" == 1 ]] || run ray status
    exec "$ROOT/recipes/train.sh" "trainer.nnodes=$NNODES" "trainer.n_gpus_per_node=$GPUS_PER_NODE" "$@"
    ;;
  stop)
    run ray stop
    ;;
  *)
    sed -n '2,12p' "$0" >&2
    exit 2
    ;;
esac
