#!/usr/bin/env bash
# The GPU run in one call: unpack the carry, then python -m recipes.gpu.run (a preflight, >= 3 verl GRPO steps of
# the rearank recipe at a tiny size, a resume, an export, a rerank with it; gpu_train.json under --out).
#
#   recipes/gpu/run.sh [--carry FILE|none] [--target DIR] [--out DIR] [--report DIR] [--device auto|cuda|cpu]
#                      [--steps N] [--assets DIR] [--overwrite]
#
#   --carry    the archive `python -m recipes.gpu.carry build` wrote (default .carry/gpu-carry.tar.xz); `none`: use
#              this environment's packages (CPU test), and --assets names the folder `carry assets` wrote
#   --target   where it is unpacked, then put on PYTHONPATH (default /tmp/rearank-gpu-carry)
#   --out      the run (checkpoints, export, logs) and gpu_train.json (default runs/gpu)
#   --report   gpu_train.json and the run's logs copied here at the end, failed or not (default $OUT when set:
#              the device machine sends back at most 8 files, so the checkpoints stay in --out)
#   PYTHON     the interpreter (default python3)
# On the GPU machine (docs/training.md, "On a GPU"):
#   recipes/gpu/run.sh                     then copy $OUT/gpu_train.json to docs/figures/gpu_train.json
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PYTHON=${PYTHON:-python3}
CARRY=$ROOT/.carry/gpu-carry.tar.xz TARGET=/tmp/rearank-gpu-carry OUT_DIR=runs/gpu REPORT=${OUT:-} ASSETS= ARGS=()
while (($#)); do
  case "$1" in
    --carry) CARRY=$2; shift 2 ;;
    --target) TARGET=$2; shift 2 ;;
    --out) OUT_DIR=$2; shift 2 ;;
    --report) REPORT=$2; shift 2 ;;
    --assets) ASSETS=$2; shift 2 ;;
    --device|--steps) ARGS+=("$1" "$2"); shift 2 ;;
    --overwrite) ARGS+=("$1"); shift ;;
    -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
abspath() { case "$1" in /*|none|"") echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
CARRY=$(abspath "$CARRY") TARGET=$(abspath "$TARGET") OUT_DIR=$(abspath "$OUT_DIR") REPORT=$(abspath "$REPORT")
ASSETS=$(abspath "$ASSETS")
cd "$ROOT"
report() {  # gpu_train.json and the logs, flat, into --report
  [[ -n "$REPORT" ]] || return 0
  mkdir -p "$REPORT"
  cp "$OUT_DIR"/gpu_train.json "$OUT_DIR"/run/logs/*.log "$REPORT"/ 2>/dev/null || true
}
trap report EXIT
if [[ "$CARRY" != none ]]; then
  echo "+ unpack $CARRY into $TARGET"
  "$PYTHON" -m recipes.gpu.carry unpack "$CARRY" --target "$TARGET"
  export PYTHONPATH="$ROOT:$TARGET/site${PYTHONPATH:+:$PYTHONPATH}"
  ASSETS=${ASSETS:-$TARGET/assets}
else
  export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
  : "${ASSETS:?--carry none needs --assets DIR (python -m recipes.gpu.carry assets DIR)}"
fi
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=${HF_HUB_OFFLINE:-1}
echo "+ $PYTHON -m recipes.gpu.run --assets $ASSETS --out $OUT_DIR ${ARGS[*]:-}"
"$PYTHON" -m recipes.gpu.run --assets "$ASSETS" --out "$OUT_DIR" ${ARGS[@]+"${ARGS[@]}"}
