# shellcheck shell=bash
# The part of the evalsuite sbatch templates they all share, sourced by each after it sets LAUNCH
# (single | torchrun | srun): settings from the environment, logging, the Python environment, the
# RAM budget gate, signal forwarding to the run, and the job log's closing summary line. When it
# returns, BASE_ARGS holds the arguments for `evalsuite run`; the template then calls
# `launch COMMAND...` and `finish`.
set -o pipefail
TASK=${TASK:-demo}
MODEL=${MODEL:-efficientnet_lite0_imagenet}
OUT=${OUT:-evalsuite_out}
MAX_REQUEUES=${MAX_REQUEUES:-5}
EXIT_PREEMPTED=75   # evalsuite.errors.EXIT_PREEMPTED: stopped after a chunk, rerun resumes
EXIT_REFUSE=3       # evalsuite.errors.EXIT_REFUSE: the RAM budget gate said no

log() { printf '[evalsuite-job %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
summary() { printf 'summary: %s\n' "$*"; }
die() {  # die EXIT_CODE MESSAGE: the summary line, the log's last, says the reason once
    summary "FAILED task=$TASK model=$MODEL exit=$1: $2"
    exit "$1"
}

activate_env() {
    if [ -n "${EVALSUITE_SETUP:-}" ]; then
        log "EVALSUITE_SETUP: $EVALSUITE_SETUP"
        eval "$EVALSUITE_SETUP" || die 2 "EVALSUITE_SETUP failed: $EVALSUITE_SETUP"
    fi
    local venv
    if [ "${EVALSUITE_VENV+set}" = set ]; then
        venv=$EVALSUITE_VENV
    elif [ -f "${SLURM_SUBMIT_DIR:-$PWD}/.venv/bin/activate" ]; then
        venv=${SLURM_SUBMIT_DIR:-$PWD}/.venv
    else
        venv=""
    fi
    if [ -n "$venv" ]; then
        [ -f "$venv/bin/activate" ] || die 2 "EVALSUITE_VENV=$venv has no bin/activate"
        # shellcheck disable=SC1091
        source "$venv/bin/activate"
    fi
    python -c 'import evalsuite' 2>/dev/null \
        || die 2 "python ($(command -v python || echo 'not on PATH')) cannot import evalsuite; set EVALSUITE_VENV"
    log "python $(command -v python), evalsuite $(python -c 'import evalsuite; print(evalsuite.__version__)')"
}

export_split_fragments() {  # the pieces of EXTRA_ARGS/RUN_ARGS that sbatch --export cut off at a comma
    # sbatch splits --export=ALL,RUN_ARGS=--probes linear,knn at the comma: the job gets RUN_ARGS=--probes linear
    # and ends OK with the wrong run. SLURM_EXPORT_ENV keeps the whole option; a piece that is no NAME or
    # NAME=VALUE, or a bare NAME after one of our *_ARGS that the job does not have (Slurm exports a bare NAME
    # from the submit shell), was part of a value. Slurm keeps commas inside "...".
    python - <<'PYEOF'
import os, re
items, piece, quoted = [], "", False
for char in os.environ.get("SLURM_EXPORT_ENV", ""):
    if char == '"':
        quoted = not quoted
    if char == "," and not quoted:
        items.append(piece)
        piece = ""
    else:
        piece += char
items.append(piece)
owner, lost = None, {}
for item in items:
    named = re.match(r"([A-Za-z_]\w*)=", item)
    if named or item in ("", "ALL", "NONE", "NIL"):
        owner = named.group(1) if named else None
    elif not re.fullmatch(r"[A-Za-z_]\w*", item) or (owner in ("EXTRA_ARGS", "RUN_ARGS") and item not in os.environ):
        lost.setdefault(owner or "a value", []).append(item)
for owner, pieces in lost.items():
    print(f"{owner} (lost: {', '.join(repr(p) for p in pieces)})")
PYEOF
}

args_from_file() {  # args_from_file ARRAY FILE: append FILE's arguments, one flag (and its value) per line
    local -n into=$1
    local line
    [ -f "$2" ] || die 2 "$3=$2: no such file (one flag and its value per line; see docs/slurm.md)"
    while IFS= read -r line || [ -n "$line" ]; do
        line="${line#"${line%%[![:space:]]*}"}"
        line="${line%"${line##*[![:space:]]}"}"
        case "$line" in '' | '#'*) continue ;; esac
        # `--data-root /data/my slides` is a flag and one value: the value keeps its spaces and commas.
        if [[ "$line" =~ ^(-[^[:space:]=]+)[[:space:]]+(.*)$ ]]; then
            into+=("${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}")
        else
            into+=("$line")
        fi
    done < "$2"
}

unquote() {  # sbatch keeps commas inside --export=ALL,RUN_ARGS='"a,b"' but passes the quotes on
    local value=$1
    if [ "${#value}" -ge 2 ] && [ "${value:0:1}" = '"' ] && [ "${value: -1}" = '"' ]; then value=${value:1:-1}; fi
    printf '%s' "$value"
}

collect_args() {  # EXTRA (budget and run) and RUN_EXTRA (run only): the *_ARGS words, then the *_ARGS_FILE lines
    local lost
    lost=$(export_split_fragments)
    [ -z "$lost" ] || die 2 "sbatch --export split ${lost//$'\n'/; } at commas; put the arguments in a file, one flag per line, and pass RUN_ARGS_FILE=FILE or EXTRA_ARGS_FILE=FILE (docs/slurm.md)"
    read -r -a EXTRA <<< "$(unquote "${EXTRA_ARGS:-}")"
    read -r -a RUN_EXTRA <<< "$(unquote "${RUN_ARGS:-}")"
    if [ -n "${EXTRA_ARGS_FILE:-}" ]; then args_from_file EXTRA "$EXTRA_ARGS_FILE" EXTRA_ARGS_FILE; fi
    if [ -n "${RUN_ARGS_FILE:-}" ]; then args_from_file RUN_EXTRA "$RUN_ARGS_FILE" RUN_ARGS_FILE; fi
    log "arguments for budget and run: ${EXTRA[*]@Q}; for run only: ${RUN_EXTRA[*]@Q}"  # quoted: spaces show
}

allocated_mem_mb() {  # this node's memory allocation in MB, from Slurm
    # 0 is Slurm's "all the node's memory", not a limit: then the budget reads the node's own limits.
    if [ -n "${SLURM_MEM_PER_NODE:-}" ] && [ "$SLURM_MEM_PER_NODE" != 0 ]; then
        echo "$SLURM_MEM_PER_NODE"
    elif [ -n "${SLURM_MEM_PER_CPU:-}" ] && [ "$SLURM_MEM_PER_CPU" != 0 ]; then
        echo $((SLURM_MEM_PER_CPU * ${SLURM_CPUS_ON_NODE:-1}))
    elif [ -n "${SLURM_JOB_ID:-}" ]; then
        # --mem=0 / --exclusive export no SLURM_MEM_*; the allocation is per node in `show job -d`
        scontrol show job -d "$SLURM_JOB_ID" 2>/dev/null | grep -o ' Mem=[0-9]*' | cut -d= -f2 | grep -vx 0 | sort -n | head -n1
    fi
}

budget_gate() {  # plan the run against the allocation; exit before any extraction on refuse
    local mem_mb plan rc reason
    mem_mb=$(allocated_mem_mb)
    MEM_ARGS=()
    if [ -n "$mem_mb" ]; then MEM_ARGS=(--mem "${mem_mb}M"); fi
    BASE_ARGS=(--task "$TASK" --model "$MODEL" --out "$OUT" "${MEM_ARGS[@]}" "${EXTRA[@]}")
    log "RAM budget gate: python -m evalsuite budget ${BASE_ARGS[*]}"
    GATE_LOG=$(mktemp "${TMPDIR:-/tmp}/evalsuite-gate.XXXXXX")
    python -m evalsuite budget "${BASE_ARGS[@]}" > "$GATE_LOG" 2>&1
    rc=$?
    reason=$(sed -n 's/^evalsuite: error: //p' "$GATE_LOG" | head -n1)
    if [ "$rc" = 0 ] || [ "$rc" = "$EXIT_REFUSE" ]; then
        cat "$GATE_LOG"
    else  # the reason goes into the summary line below: once in the log, not three times
        grep -v '^evalsuite: error: ' "$GATE_LOG" || true
    fi
    plan=$(sed -n 's/^decision: \([a-z]*\).*/\1/p' "$GATE_LOG" | head -n1)
    rm -f "$GATE_LOG"
    case "$rc" in
        0)
            log "RAM budget gate: plan ${plan:-?}: feature caches $([ "$plan" = memmap ] && echo 'memory-mapped from disk' || echo 'in RAM')"
            ;;
        "$EXIT_REFUSE")
            log "RAM budget gate: plan refuse: the run does not fit in ${mem_mb:-?} MB; nothing was extracted"
            summary "REFUSED task=$TASK model=$MODEL plan=refuse mem=${mem_mb:-?}M: see the budget lines above (needed vs usable bytes)"
            exit "$EXIT_REFUSE"
            ;;
        *)
            die "$rc" "the budget command failed (exit $rc): ${reason:-see above}"
            ;;
    esac
}

# shellcheck disable=SC2317  # called from the traps below
on_signal() {  # forward a stop request to the workers; evalsuite finishes the current chunk
    SIGNALLED=1
    if [ "$1" = TERM ]; then GOT_TERM=1; else GOT_USR1=1; fi
    echo  # a progress bar may be mid-line
    log "got SIG$1: asking evalsuite to stop after the current extraction chunk"
    [ -n "${CHILD:-}" ] || return 0  # not launched yet: launch() does not start it
    case "$LAUNCH" in
        single) kill -s "$1" "$CHILD" 2>/dev/null ;;
        torchrun) pkill -"$1" -P "$CHILD" ;;  # the ranks (torchrun's children), not torchrun itself
        srun) scancel --signal="$1" "$SLURM_JOB_ID" ;;  # every job step (not this script); torchrun ignores USR1
    esac
}

launch() {  # launch CMD...: run it in the background, forwarding USR1/TERM; sets RUN_RC and RUN_LOG
    RUN_LOG=$(mktemp "${TMPDIR:-/tmp}/evalsuite-run.XXXXXX")
    if [ "$GOT_TERM" = 1 ] || [ "$GOT_USR1" = 1 ]; then  # during the gate: nothing to stop yet
        log "not starting the run: a stop signal came first"
        RUN_RC=$EXIT_PREEMPTED
        trap - USR1 TERM
        return
    fi
    log "running: $*"
    "$@" > "$RUN_LOG" 2>&1 &
    CHILD=$!
    tail -n +1 -s 1 --pid="$CHILD" -f "$RUN_LOG" &  # the run's output, live, into the job log
    local tail_pid=$! rc
    wait "$CHILD"
    RUN_RC=$?
    while [ "$SIGNALLED" = 1 ]; do  # the wait was cut short by a signal: wait again
        SIGNALLED=0
        wait "$CHILD"
        rc=$?
        [ "$rc" = 127 ] && break
        RUN_RC=$rc
    done
    while ! wait "$tail_pid"; do kill -0 "$tail_pid" 2>/dev/null || break; done
    trap - USR1 TERM
}

finish() {  # the log's last line: what happened and where the results are
    local results
    if [ "$RUN_RC" = 0 ]; then
        results=$(sed -n 's/^results: //p' "$RUN_LOG" | tail -n1)
        rm -f "$RUN_LOG"
        if [ -z "$results" ] || [ ! -f "$results" ]; then die 1 "the run exited 0 but printed no results file"; fi
        python - "$results" <<'EOF' || summary "OK task=$TASK model=$MODEL results=$results"
import json, math, sys
path = sys.argv[1]
r = json.load(open(path))
metric = r["task"]["selection_metric"]
entries = {}  # probe -> its entries (one per seed)
for entry in r["probes"]:
    entries.setdefault(entry["probe"], []).append(entry)
def mean(name, split, which=metric):
    values = [(e["metrics"].get(split) or {}).get(which, math.nan) for e in entries[name]]
    values = [v for v in values if isinstance(v, (int, float)) and v == v]
    return sum(values) / len(values) if values else math.nan
# The probe the leaderboard shows (evalsuite's own choice: metric direction, ties to the lower val NLL); its test mean.
from evalsuite.reporting.table.wide import choose_probe
scored = {name: mean(name, "val") for name in entries if not math.isnan(mean(name, "val"))}
nll = {name: mean(name, "val", "nll") for name in scored if not math.isnan(mean(name, "val", "nll"))}
best = choose_probe(scored, nll, metric) if scored else next(iter(entries))
print(f"summary: OK task={r['task']['name']} model={r['model']['name']} {metric}(test)={mean(best, 'test'):.4f} "
      f"probe={best} seeds={len(entries[best])} device={r.get('device', '?')} cache={r.get('cache', {}).get('mode', '?')} "
      f"run={r['run_id']} results={path}")
EOF
        exit 0
    fi
    rm -f "$RUN_LOG"
    if [ "$GOT_TERM" = 1 ]; then
        # scancel, a preemption or the hard time limit: Slurm requeues preempted jobs itself.
        summary "STOPPED task=$TASK model=$MODEL exit=$RUN_RC: SIGTERM from Slurm; finished chunks are cached, the same job resumes"
        exit "$RUN_RC"
    fi
    if [ "$GOT_USR1" = 1 ] || [ "$RUN_RC" = "$EXIT_PREEMPTED" ]; then
        local restarts=${SLURM_RESTART_COUNT:-0}
        if [ -z "${SLURM_JOB_ID:-}" ] || [ "$restarts" -ge "$MAX_REQUEUES" ]; then
            summary "STOPPED task=$TASK model=$MODEL exit=$RUN_RC: stopped after a chunk, not requeued (restarts $restarts, MAX_REQUEUES $MAX_REQUEUES); resubmit to resume"
            exit "$RUN_RC"
        fi
        summary "REQUEUED task=$TASK model=$MODEL exit=$RUN_RC restart=$((restarts + 1)): stopped after a chunk; the requeued job resumes from the cache"
        scontrol requeue "$SLURM_JOB_ID" || die "$RUN_RC" "scontrol requeue $SLURM_JOB_ID failed; resubmit to resume"
        sleep 60  # the requeue ends this script with SIGTERM; do not report completion before it
        exit "$RUN_RC"
    fi
    die "$RUN_RC" "evalsuite run failed (exit $RUN_RC), see above"
}

SIGNALLED=0 GOT_TERM=0 GOT_USR1=0 CHILD=""
trap 'on_signal USR1' USR1  # installed first: an early USR1 must not kill the script
trap 'on_signal TERM' TERM
log "job ${SLURM_JOB_ID:-none} on $(hostname) (restart ${SLURM_RESTART_COUNT:-0}): task=$TASK model=$MODEL out=$OUT" \
    "gpus=${SLURM_GPUS_ON_NODE:-0} CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-unset}"
activate_env
collect_args
mkdir -p "$OUT" || die 2 "cannot create OUT=$OUT"
OUT=$(cd "$OUT" && pwd)
budget_gate
