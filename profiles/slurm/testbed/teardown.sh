#!/usr/bin/env bash
# Stops the daemons setup.sh started: slurmd, slurmctld, then munged (unless
# --slurm-only). Jobs still running are killed with slurmd; slurmctld saves its state
# in /var/lib/slurm/slurmctld, so pending jobs are queued again at the next setup.sh.
set -euo pipefail

[ "$(id -u)" = 0 ] || { echo "teardown.sh: run as root" >&2; exit 1; }

stop() {  # stop <name> <pid file>: SIGTERM the daemon by its pid, wait until it is gone
    local name=$1 pidfile=$2 pid
    [ -s "$pidfile" ] || return 0
    pid=$(cat "$pidfile")
    if kill -0 "$pid" 2>/dev/null; then
        echo "teardown.sh: stopping $name ($pid)"
        kill "$pid"
        for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
        kill -0 "$pid" 2>/dev/null && { echo "teardown.sh: $name ($pid) still running" >&2; exit 1; }
    fi
    rm -f "$pidfile"
}

stop slurmd /run/slurmd.pid
stop slurmctld /run/slurmctld.pid
[ "${1:-}" = --slurm-only ] || stop munged /run/munge/munged.pid

# With the controller gone, every Snakemake start would wait about 10 s: the Slurm
# executor plugin runs `scontrol show config` when it is imported, and scontrol retries
# the dead controller. Without a slurm.conf it fails at once; setup.sh writes it again.
if [ "${1:-}" != --slurm-only ] && [ -e /etc/slurm/slurm.conf ]; then
    mv /etc/slurm/slurm.conf /etc/slurm/slurm.conf.stopped
    echo "teardown.sh: moved /etc/slurm/slurm.conf to slurm.conf.stopped (setup.sh writes it again)"
fi
