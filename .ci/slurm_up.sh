#!/usr/bin/env bash
# Start a private single-node Slurm cluster on localhost for the sbatch template tests.
#
#   bash .ci/slurm_up.sh DIR     # then: export SLURM_CONF=DIR/slurm.conf; sbatch ...
#   bash .ci/slurm_down.sh DIR   # stops what this started, by the PIDs recorded in DIR
#
# Everything lives in DIR: munge key/socket/log, slurm.conf, gres.conf, spool, state, logs,
# PID files. Nothing under /etc or /run is touched, the ports are free ones picked at start,
# so it can run beside a system Slurm or another copy of itself. Needs root (slurmd launches
# jobs as the submitting user) and the Debian packages slurmctld slurmd slurm-client munge.
#
# The node is declared bigger than the machine (SlurmdParameters=config_overrides) so the
# templates' real requests fit: 32 CPUs, 256 GB, 8 GPUs. The GPUs are gres files that are
# symlinks to /dev/null (a gpu gres without File= drains the node); Slurm sets
# CUDA_VISIBLE_DEVICES and SLURM_GPUS_ON_NODE for them, torch sees no CUDA and runs on the CPU.
set -euo pipefail

DIR=${1:?usage: slurm_up.sh STATE_DIR}
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
NODE_CPUS=${EVALSUITE_SLURM_CPUS:-32}
NODE_MEM_MB=${EVALSUITE_SLURM_MEM_MB:-256000}
NODE_GPUS=${EVALSUITE_SLURM_GPUS:-2}

for tool in munged slurmctld slurmd sinfo sbatch scontrol; do
    command -v "$tool" >/dev/null || { echo "slurm_up: $tool not found (apt-get install slurmctld slurmd slurm-client munge)" >&2; exit 1; }
done
if [ -e "$DIR/slurmctld.pid" ] || [ -e "$DIR/slurmd.pid" ] || [ -e "$DIR/munge/munged.pid" ]; then
    echo "slurm_up: $DIR already has daemon PID files; run slurm_down.sh $DIR first" >&2
    exit 1
fi

# --- munge: own key, socket, log, PID and seed file (root; socket dir 755, key 400) ---
mkdir -p "$DIR/munge"
chmod 755 "$DIR" "$DIR/munge"
dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$DIR/munge/munge.key"
munged --force --socket="$DIR/munge/munge.socket" --key-file="$DIR/munge/munge.key" \
    --log-file="$DIR/munge/munged.log" --pid-file="$DIR/munge/munged.pid" --seed-file="$DIR/munge/munged.seed"

# --- fake GPUs and free ports ---
mkdir -p "$DIR/dev" "$DIR/spool/ctld" "$DIR/spool/d" "$DIR/log"
for ((i = 0; i < NODE_GPUS; i++)); do ln -sfn /dev/null "$DIR/dev/nvidia$i"; done
read -r CTLD_PORT SLURMD_PORT < <(python3 - <<'EOF'
import socket
socks = [socket.socket() for _ in range(2)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))
EOF
)

cat > "$DIR/slurm.conf" <<EOF
# Written by .ci/slurm_up.sh: a throw-away single-node cluster for the evalsuite CI.
ClusterName=evalsuite-ci
SlurmctldHost=localhost
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# cred_expire: how long a requeued job waits before it may start again (default 120 s)
AuthInfo=socket=$DIR/munge/munge.socket,cred_expire=10
StateSaveLocation=$DIR/spool/ctld
SlurmdSpoolDir=$DIR/spool/d
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
EnforcePartLimits=ALL
ReturnToService=2
# sbatch --wait polls every 2 s only while 2 s >= MinJobAge / 2 (it backs off to 32 s otherwise)
MinJobAge=4
KillWait=30
JobRequeue=1
MpiDefault=none
PlugStackConfig=$DIR/plugstack.conf
SlurmdParameters=config_overrides
GresTypes=gpu
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$NODE_CPUS RealMemory=$NODE_MEM_MB Gres=gpu:$NODE_GPUS State=UNKNOWN
PartitionName=ci Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
: > "$DIR/plugstack.conf"
{
    echo "# fake GPUs: symlinks to /dev/null"
    echo "Name=gpu File=$DIR/dev/nvidia[0-$((NODE_GPUS - 1))]"
} > "$DIR/gres.conf"

export SLURM_CONF="$DIR/slurm.conf"
slurmctld -f "$SLURM_CONF"
slurmd -f "$SLURM_CONF" -N localhost

for _ in $(seq 60); do
    state=$(sinfo -h -N -o '%T' 2>/dev/null | head -n1 || true)
    if [ "$state" = idle ]; then
        echo "slurm_up: cluster up in $DIR (slurmctld port $CTLD_PORT, slurmd port $SLURMD_PORT)"
        sinfo -N -o '%N %T %c %m %G'
        exit 0
    fi
    sleep 0.5
done
echo "slurm_up: node not idle after 30 s (state '${state:-none}'); logs:" >&2
tail -n 20 "$DIR/log/slurmctld.log" "$DIR/log/slurmd.log" "$DIR/munge/munged.log" >&2 || true
exit 1
