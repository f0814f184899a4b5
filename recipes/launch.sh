#!/usr/bin/env bash
# The training launcher, one node or many: `make train RECIPE=<name> NNODES=N` runs `recipes/launch.sh train`.
#
#   recipes/launch.sh [train] [overrides...]     every stage of RECIPE (recipes/train.sh) on NNODES nodes (default 1)
#     one node          recipes/train.sh as it is
#     Slurm             inside an allocation (sbatch recipes/slurm/train.sbatch, or salloc): the torchrun stage (the
#                       SFT of grouprank/reasonrank, RRPO) as one srun task a node, node rank SLURM_NODEID, master the
#                       head; then a Ray head (srun -w <head> ... head --block) and workers (srun on the other nodes,
#                       worker --block), and GRPO on that cluster from the SFT folder; the srun steps end with it
#     a Ray cluster     no Slurm: the Ray nodes are up (`head` / `worker` below on each node); GRPO joins RAY_ADDRESS
#                       (default HEAD_ADDR:RAY_PORT when HEAD_ADDR is set, else auto) once NNODES nodes are up; a
#                       torchrun stage runs with STAGE=torchrun NODE_RANK=<i> on every node first (docs/training.md)
#   recipes/launch.sh head [ray start options]    ray start --head on this node, at the head address
#   recipes/launch.sh worker [ray start options]  ray start joining the head (HEAD_ADDR, else Slurm's first host)
#   recipes/launch.sh wait                        until NNODES Ray nodes are up at RAY_ADDRESS (RAY_WAIT_S, 600 s)
#   recipes/launch.sh stop                        ray stop (every Ray node of this machine)
#
# The head address: HEAD_ADDR (a host name or IP of the head, e.g. its InfiniBand address), else the first host of
# SLURM_JOB_NODELIST (scontrol show hostnames), else this machine's host name; printed with the IP it resolves to
# and the interface that carries it. Every node runs PYTHON (default .venv/bin/python of this checkout, which
# `make setup-gpu` builds), printed on each, and needs the same paths for the data and checkpoints (a shared
# filesystem). Settings reach every node: srun passes the environment, recipes/train.sh hands the recipe's
# ${oc.env:NAME} settings to every Ray worker. Environment: RAY_PORT (6379), GPUS_PER_NODE (Ray's --num-gpus and
# recipes/train.sh's), NNODES, DRY_RUN=1 (print the commands only), plus everything recipes/train.sh reads.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RAY_PORT=${RAY_PORT:-6379}
NNODES=${NNODES:-1}
if [[ -z "${PYTHON:-}" ]]; then
  if [[ -x "$ROOT/.venv/bin/python" ]]; then PYTHON=$ROOT/.venv/bin/python; else PYTHON=python; fi
fi
export PYTHON NNODES
# Ray's token authentication, one rule on every node: `ray start --head` turns it on when a token exists (Ray 2.60),
# a joining worker only when told; with a token (RAY_AUTH_TOKEN, or the file: a shared home) every node uses it
if [[ -z "${RAY_AUTH_MODE:-}" && ( -n "${RAY_AUTH_TOKEN:-}" || -f "${RAY_AUTH_TOKEN_PATH:-$HOME/.ray/auth_token}" ) ]]; then
  export RAY_AUTH_MODE=token
fi
die() { echo "launch.sh: $*" >&2; exit 2; }
run() { echo "+ ${*@Q}" >&2; "$@"; }  # srun: in a dry run too, its tasks print their commands
# the ray of PYTHON's environment, in this process: a signal to it (srun's at the step's end) reaches `ray start`,
# which with --block stops its node's processes
ray_cli() {
  echo "+ ${PYTHON@Q} '-m' 'ray.scripts.scripts' ${*@Q}" >&2
  [[ "${DRY_RUN:-0}" == 1 ]] || exec "$PYTHON" -m ray.scripts.scripts "$@"
}

# the head: HEAD_HOST (where Slurm runs it), HEAD_IP (what the other nodes and torchrun reach it at)
head_address() {
  local from dev
  if [[ -n "${SLURM_JOB_NODELIST:-}" ]]; then
    command -v scontrol >/dev/null || die "SLURM_JOB_NODELIST is set but scontrol is not on PATH (a Slurm node has it)"
    HOSTS=$(scontrol show hostnames "$SLURM_JOB_NODELIST")  # whole (a pipe into head could end it with SIGPIPE)
    HEAD_HOST=${HOSTS%%$'\n'*}
    [[ -n "$HEAD_HOST" ]] || die "scontrol show hostnames $SLURM_JOB_NODELIST named no host"
    from="first host of SLURM_JOB_NODELIST=$SLURM_JOB_NODELIST"
  else
    HEAD_HOST=$(hostname) from="this machine; set HEAD_ADDR to choose"
  fi
  [[ -n "${HEAD_ADDR:-}" ]] && from=HEAD_ADDR
  HEAD_IP=$(getent ahostsv4 "${HEAD_ADDR:-$HEAD_HOST}" 2>/dev/null | awk 'NR == 1 {print $1}') || true
  HEAD_IP=${HEAD_IP:-${HEAD_ADDR:-$HEAD_HOST}}
  # the interface: the one holding that address on the head, else the route to it from this node
  dev=$(ip -o -4 addr show 2>/dev/null | awk -v ip="$HEAD_IP" '{split($4, a, "/"); if (a[1] == ip) {print $2; exit}}') || true
  [[ -n "$dev" ]] || dev=$(ip -o -4 route get "$HEAD_IP" 2>/dev/null | sed -n 's/.* dev \([^ ]*\).*/\1/p') || true
  echo "launch.sh: head ${HEAD_ADDR:-$HEAD_HOST} = $HEAD_IP, interface ${dev:-unknown} ($from)" >&2
}
# the Ray cluster to join: RAY_ADDRESS, else the head's when HEAD_ADDR names it, else Ray's own search (auto)
ray_address() {
  if [[ -z "${RAY_ADDRESS:-}" && -n "${HEAD_ADDR:-}" ]]; then
    [[ -n "${HEAD_IP:-}" ]] || head_address
    RAY_ADDRESS=$HEAD_IP:$RAY_PORT
  fi
  export RAY_ADDRESS=${RAY_ADDRESS:-auto}
}
node_line() { echo "launch.sh: $1 on $(hostname), python $PYTHON, RAY_AUTH_MODE=${RAY_AUTH_MODE:-unset}" >&2; }

wait_for_nodes() {  # $1: Ray nodes to wait for
  if [[ "${DRY_RUN:-0}" == 1 ]]; then wait; return 0; fi  # the steps started so far only print their commands
  "$PYTHON" - "$1" "${RAY_WAIT_S:-600}" <<'PY'
import sys, time
import ray
want, deadline = int(sys.argv[1]), time.monotonic() + float(sys.argv[2])
while True:
    try:
        ray.init(log_to_driver=False, logging_level="ERROR")
        break
    except ConnectionError:  # the head is not up yet
        if time.monotonic() > deadline:
            sys.exit("launch.sh: no Ray cluster answered; start it with `recipes/launch.sh head` (RAY_ADDRESS)")
        time.sleep(2)
while len(alive := [n["NodeID"] for n in ray.nodes() if n["Alive"]]) < want:
    if time.monotonic() > deadline:
        sys.exit(f"launch.sh: {len(alive)} of {want} Ray nodes up after {sys.argv[2]} s; start the others with "
                 "`recipes/launch.sh worker` (RAY_WAIT_S to wait longer)")
    time.sleep(2)
print(f"launch.sh: {len(alive)} Ray nodes up: {' '.join(alive)}", file=sys.stderr)
PY
}

command=train
if [[ $# -gt 0 && "$1" =~ ^(train|head|worker|wait|stop)$ ]]; then command=$1; shift; fi
case "$command" in
  head)
    head_address
    node_line "Ray head"
    ray_cli start --head "--node-ip-address=$HEAD_IP" "--port=$RAY_PORT" \
      ${GPUS_PER_NODE:+"--num-gpus=$GPUS_PER_NODE"} "$@"
    ;;
  worker)
    head_address
    node_line "Ray worker"
    ray_cli start "--address=$HEAD_IP:$RAY_PORT" ${GPUS_PER_NODE:+"--num-gpus=$GPUS_PER_NODE"} "$@"
    ;;
  wait)
    ray_address
    wait_for_nodes "$NNODES"
    ;;
  stop)
    ray_cli stop
    ;;
  train)
    [[ "$NNODES" =~ ^[1-9][0-9]*$ ]] || die "NNODES=$NNODES: a node count (1, 2, ...)"
    [[ "$NNODES" == 1 ]] && exec "$ROOT/recipes/train.sh" "$@"
    head_address
    export MASTER_ADDR=${MASTER_ADDR:-$HEAD_IP}
    kinds=$("$ROOT/recipes/train.sh" --stages | awk '{print $2}')
    if [[ -z "${SLURM_JOB_NODELIST:-}" ]]; then  # a Ray cluster started by hand
      ray_address
      [[ "${STAGE:-all}" != torchrun && "$kinds" == *ray* ]] && wait_for_nodes "$NNODES"
      exec "$ROOT/recipes/train.sh" "$@"
    fi
    [[ "$(wc -l <<<"$HOSTS")" -ge "$NNODES" ]] \
      || die "NNODES=$NNODES but the allocation SLURM_JOB_NODELIST=$SLURM_JOB_NODELIST has fewer nodes"
    steps=()
    trap 'for pid in ${steps[@]+"${steps[@]}"}; do kill "$pid" 2>/dev/null || true; done' EXIT
    if [[ "${STAGE:-all}" != ray && "$kinds" == *torchrun* ]]; then
      # every node: its torchrun stage with the scheduler's node rank (SLURM_NODEID in each task), the head as master
      run srun "--nodes=$NNODES" "--ntasks=$NNODES" --ntasks-per-node=1 --kill-on-bad-exit=1 \
        env -u NODE_RANK STAGE=torchrun "$ROOT/recipes/train.sh" "$@"
    fi
    if [[ "${STAGE:-all}" != torchrun && "$kinds" == *ray* ]]; then
      # Ray lives as long as its srun steps do: --block keeps each `ray start` in the foreground
      run srun --nodes=1 --ntasks=1 "--nodelist=$HEAD_HOST" "$ROOT/recipes/launch.sh" head --block &
      steps+=($!)
      export RAY_ADDRESS=$HEAD_IP:$RAY_PORT
      wait_for_nodes 1
      if [[ "$NNODES" -gt 1 ]]; then
        run srun "--nodes=$((NNODES - 1))" "--ntasks=$((NNODES - 1))" --ntasks-per-node=1 "--exclude=$HEAD_HOST" \
          "$ROOT/recipes/launch.sh" worker --block &
        steps+=($!)
      fi
      wait_for_nodes "$NNODES"
      STAGE=ray "$ROOT/recipes/train.sh" "$@"
    fi
    ;;
esac
