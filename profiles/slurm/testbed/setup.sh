#!/usr/bin/env bash
# A real one-node Slurm cluster on this machine (Debian 12, root, no systemd), to run
# the workflow through profiles/slurm-testbed. Idempotent: a second run finds the
# packages, the key, the same slurm.conf and the running daemons, and changes nothing.
#   sudo profiles/slurm/testbed/setup.sh        # teardown.sh stops the daemons
set -euo pipefail

CONF=/etc/slurm/slurm.conf
NODE=$(hostname -s)
CPUS=$(nproc)
MEM_MARGIN_MB=1024   # left to the OS and the daemons; a node whose RealMemory exceeds
                     # what slurmd measures is set DRAIN ("Low RealMemory")

log() { printf 'setup.sh: %s\n' "$*"; }
die() { printf 'setup.sh: %s\n' "$*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "run as root"

# Wait up to $1 seconds for the command after it to succeed.
wait_for() {
    local secs=$1; shift
    for _ in $(seq "$secs"); do "$@" >/dev/null 2>&1 && return 0; sleep 1; done
    return 1
}

# ------------------------------------------------------------------ packages
need=()
for pkg in slurm-wlm munge; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
    log "installing ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # Docker images ship /usr/sbin/policy-rc.d (exit 101), so the packages' postinst
    # starts no daemon; without it, they start with Debian's defaults and are
    # restarted below only if their configuration differs.
    apt-get install -y -q --no-install-recommends "${need[@]}"
fi

# ------------------------------------------------------------------ munge
# Slurm authenticates every RPC with munge; one key, shared by all daemons of the
# cluster (here one host). The munge postinst usually creates it already.
if [ ! -s /etc/munge/munge.key ]; then
    log "creating /etc/munge/munge.key"
    mungekey --create --keyfile=/etc/munge/munge.key
fi
chown munge:munge /etc/munge/munge.key
chmod 400 /etc/munge/munge.key
install -d -o munge -g munge -m 0755 /run/munge   # /run is a tmpfs: gone after a reboot

# ------------------------------------------------------------------ slurm.conf
mem_total_mb=$(( $(awk '/^MemTotal:/ {print $2}' /proc/meminfo) / 1024 ))
REAL_MEM=$(( mem_total_mb - MEM_MARGIN_MB ))
new_conf=$(mktemp)
trap 'rm -f "$new_conf"' EXIT
cat > "$new_conf" <<EOF
# Written by profiles/slurm/testbed/setup.sh (dgdm): a one-node test cluster.
ClusterName=testbed
# Controller and node are this host; the address is given so that nothing depends on
# the host name resolving.
SlurmctldHost=${NODE}(127.0.0.1)
SlurmUser=slurm
AuthType=auth/munge
StateSaveLocation=/var/lib/slurm/slurmctld
SlurmdSpoolDir=/var/lib/slurm/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
MpiDefault=none
# No mail server here; the default /bin/mail is not installed (slurmctld logs an error).
MailProg=/bin/true
# No cgroups: Slurm's cgroup plugins need a cgroup hierarchy they may write to, which
# systemd usually delegates; the test machine (a container) runs no systemd. Processes
# are tracked through /proc instead, and tasks are not pinned to cores.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
# A job's CPU and memory use is sampled from /proc (sstat shows it while it runs).
JobAcctGatherType=jobacct_gather/linux
# Cores and memory are both consumable, so --mem / Snakemake's mem_mb is honoured:
# a job waits until its memory is free instead of sharing the node blindly.
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# A job without --mem would otherwise be given all the node's memory and block every
# other job (srun tests); Snakemake's jobs always pass --mem.
DefMemPerCPU=1000
# No slurmdbd: sacct cannot answer (it needs accounting storage), so Snakemake's
# executor polls with squeue (profiles/slurm-testbed sets slurm-status-command).
AccountingStorageType=accounting_storage/none
# Finished jobs are still written to a text file; \`sacct -c\` reads it.
JobCompType=jobcomp/filetxt
JobCompLoc=/var/log/slurm/jobcomp.log
# squeue shows a finished job for MinJobAge seconds. The executor keeps squeue only
# if MinJobAge >= 3 x its first poll interval (40 s by default) and polls at most
# every 180 s, so a finished job must stay visible longer than that.
MinJobAge=600
# After a restart of slurmd (e.g. this script after a reboot) the node returns to
# service by itself instead of staying DOWN.
ReturnToService=2
SlurmdTimeout=300
NodeName=${NODE} NodeAddr=127.0.0.1 CPUs=${CPUS} RealMemory=${REAL_MEM} State=UNKNOWN
PartitionName=debug Nodes=${NODE} Default=YES MaxTime=INFINITE State=UP
EOF

conf_changed=0
if ! cmp -s "$new_conf" "$CONF"; then
    log "writing $CONF (node $NODE, $CPUS CPUs, RealMemory=${REAL_MEM} MB)"
    install -m 0644 "$new_conf" "$CONF"
    conf_changed=1
fi
install -d -o slurm -g slurm /var/lib/slurm/slurmctld /var/lib/slurm/slurmd /var/log/slurm

# ------------------------------------------------------------------ daemons
running() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

if ! running /run/munge/munged.pid; then
    log "starting munged"
    runuser -u munge -- /usr/sbin/munged
fi
wait_for 10 sh -c 'munge -n | unmunge' || die "munge does not work: munge -n | unmunge"

if [ "$conf_changed" = 1 ] && { running /run/slurmctld.pid || running /run/slurmd.pid; }; then
    # A new node definition needs both daemons restarted, not just reconfigured.
    log "slurm.conf changed: restarting slurmctld and slurmd"
    "$(dirname "$0")/teardown.sh" --slurm-only
fi
if ! running /run/slurmctld.pid; then
    log "starting slurmctld"
    /usr/sbin/slurmctld
fi
wait_for 30 scontrol ping || die "slurmctld is not up (see /var/log/slurm/slurmctld.log)"
if ! running /run/slurmd.pid; then
    log "starting slurmd"
    /usr/sbin/slurmd
fi
# idle, or mix/alloc when jobs already run (a second run of this script)
node_up() { case "$(sinfo -h -N -n "$NODE" -o %t)" in idle|mix|alloc) return 0 ;; esac; return 1; }
if ! wait_for 60 node_up; then
    sinfo -N -l >&2
    die "node $NODE is not idle (see /var/log/slurm/slurmd.log)"
fi

scontrol ping
sinfo -N -o '%N %P %t %c %m'
log "ready: sbatch, srun; snakemake --profile profiles/slurm --workflow-profile profiles/slurm-testbed"
