#!/usr/bin/env bash
# Stop the cluster .ci/slurm_up.sh started in DIR: slurmd, slurmctld, then munged, each by the
# PID in its PID file (never by name, so other Slurm or munge daemons on the machine are left
# alone). Safe to call twice, on a half-started cluster, or on a DIR that does not exist.
set -uo pipefail

DIR=${1:?usage: slurm_down.sh STATE_DIR}
[ -d "$DIR" ] || exit 0

stop_pid_file() {
    local name=$1 file=$2 pid
    [ -s "$file" ] || return 0
    pid=$(tr -dc '0-9' < "$file")
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null
        for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        if kill -0 "$pid" 2>/dev/null; then
            echo "slurm_down: $name ($pid) still running after 10 s, killing" >&2
            kill -KILL "$pid" 2>/dev/null
        fi
        echo "slurm_down: stopped $name ($pid)"
    fi
    rm -f "$file"
}

# Jobs still running (a test that failed half-way) live in slurmstepd processes that outlive
# slurmd: cancel them first and wait until the queue is empty, so nothing is left behind.
if [ -f "$DIR/slurm.conf" ] && [ -s "$DIR/slurmctld.pid" ] && command -v scancel >/dev/null; then
    export SLURM_CONF="$DIR/slurm.conf"
    if [ -n "$(timeout 10 squeue -h -o %i 2>/dev/null)" ]; then
        timeout 10 scancel --user="$(id -un)" 2>/dev/null
        for _ in $(seq 60); do
            [ -z "$(timeout 10 squeue -h -o %i 2>/dev/null)" ] && break
            sleep 0.5
        done
    fi
fi
stop_pid_file slurmd "$DIR/slurmd.pid"
stop_pid_file slurmctld "$DIR/slurmctld.pid"
stop_pid_file munged "$DIR/munge/munged.pid"
exit 0
