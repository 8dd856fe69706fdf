# Shared by the testbed scripts (kill_resume.sh, two_tasks.sh, smoke.sh): sourced, not run.
# Expects NAME (the script's name for its messages) to be set before sourcing.
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
T0=$(date +%s)

say() { printf '%s: %s\n' "$NAME" "$*"; }
die() { printf '%s: FAILED: %s\n' "$NAME" "$*" >&2; exit 1; }

# new_work <folder>: make it (it must be new or empty: a stale results/ would let
# snakemake skip the very jobs a script is about), check the testbed is up, print its
# absolute path.
new_work() {
    mkdir -p "$1"
    local w; w=$(cd "$1" && pwd)
    [ -z "$(ls -A "$w")" ] || die "$w is not empty"
    scontrol ping >/dev/null 2>&1 || die "no slurmctld: run profiles/slurm/testbed/setup.sh"
    printf '%s\n' "$w"
}

# copy_tree <dest>: the working tree as tests/_workflow.copy_repo copies it, so that two
# runs share no results/ and no .snakemake/.
copy_tree() {
    mkdir -p "$1"
    tar -C "$REPO" --exclude=.snakemake --exclude=__pycache__ --exclude='*.egg-info' \
        -cf - Snakefile workflow config profiles src pyproject.toml | tar -C "$1" -xf -
}

# smk <dir> <config> <snakemake args...>: the cluster run, as the README gives it.
# threads=1: every job asks Slurm for the same CPUs whatever the config says (and a
# 2-task job fits the testbed's 2 CPUs). exec: $! of a background smk is snakemake's pid.
smk() {
    local dir=$1 cfg=$2; shift 2
    (cd "$dir" && exec env TF_CPP_MIN_LOG_LEVEL=2 PYTHONDONTWRITEBYTECODE=1 nice -n 15 \
        python -m snakemake --profile profiles/slurm --workflow-profile profiles/slurm-testbed \
        "$@" --configfile "$cfg" --config threads=1)
}

job_ids() { grep -ho 'submitted with SLURM jobid [0-9]*' "$@" | awk '{print $NF}' | paste -sd, -; }

# wait_checkpoint <checkpoint.npz> <snakemake pid> <min sweep>: poll (every 0.05 s: a
# smoke chain's sweep can be 0.2 s) until the checkpoint holds sweep >= min; print it.
# The file is replaced atomically; a read that fails is retried. No deadline while
# snakemake lives: on a loaded machine the jobs before the chain can take an hour.
wait_checkpoint() {
    python - "$@" <<'PY'
import os, sys, time
import numpy as np
path, pid, least = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
while True:
    try:
        os.kill(pid, 0)
    except OSError:
        sys.exit(f"snakemake ended before {path} reached sweep {least}")
    try:
        with np.load(path) as z:
            sweep = int(z["sweep"])
        if sweep >= least:
            print(sweep)
            sys.exit(0)
    except (OSError, KeyError, ValueError, EOFError):
        pass
    time.sleep(0.05)
PY
}

# running_job <dir>: "id name state time workdir" of the running job of that copy, from
# squeue, as an operator would find it.
running_job() { squeue -h -t RUNNING -o '%i %j %T %M %Z' | awk -v d="$1" '$5 == d'; }

# cancel_mid_chain <dir> <checkpoint.npz> <snakemake pid> <sweeps> <target> [<log>]: once
# the chain's checkpoint holds sweep >= 2, scancel the copy's running job (as a pre-emption
# would); fails unless the chain was still running (sweep < sweeps, target not written).
# Sets CANCEL_JOB, CANCEL_AT (epoch seconds of the scancel) and, given the chain's log,
# CANCEL_SWEEP: the last sweep its progress lines reported done at the scancel (the chain
# was then in the next one).
cancel_mid_chain() {
    local dir=$1 ckpt=$2 pid=$3 sweeps=$4 target=$5 log=${6:-} sweep line job
    sweep=$(wait_checkpoint "$dir/$ckpt" "$pid" 2) || { kill "$pid" 2>/dev/null; die "poll"; }
    line=$(running_job "$dir" | head -1)
    job=$(awk '{print $1}' <<<"$line")
    [ -n "$job" ] || { kill "$pid"; die "no running job of $dir in squeue"; }
    CANCEL_SWEEP=
    [ -z "$log" ] || CANCEL_SWEEP=$(last_sweep "$dir/$log" "$sweeps")
    CANCEL_AT=$(date +%s.%N)
    scancel "$job"
    CANCEL_JOB=$job
    say "squeue before the kill: $line"
    say "scancel $job at checkpoint sweep $sweep of $sweeps${CANCEL_SWEEP:+, the log at sweep $CANCEL_SWEEP done}"
    [ "$sweep" -lt "$sweeps" ] && [ ! -e "$dir/$target" ] || die "the chain had ended: not killed mid-chain"
}

# last_sweep <log> <sweeps>: the last sweep a chain's progress lines ("... sweep 7/60 (")
# report done; 0 before the first.
last_sweep() {
    local s
    s=$({ grep -o " sweep [0-9]*/$2 (" "$1" 2>/dev/null || true; } | tail -1 | sed 's|^ sweep \([0-9]*\)/.*|\1|')
    printf '%s\n' "${s:-0}"
}

# watch_leave <job> <scancel epoch> <checkpoint.npz> <log>: poll (every 0.1 s) until the
# cancelled job has left squeue; print the seconds from the scancel to the job's
# COMPLETING state, to its leaving squeue, to the chain's "SIGTERM: stopped after sweep
# N/M" line in its log and to its checkpoint's last sweep, then that line's N (the sweep
# it stopped after; "none" when the log has no such line). Gives up after 600 s.
watch_leave() {
    python - "$@" <<'PY'
import re, subprocess, sys, time
import numpy as np
job, t0, ckpt, log = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4]
stop_re = re.compile(r"SIGTERM: stopped after sweep (\d+)/\d+[^\n]*")
completing = gone = stopped_at = None
stop_line, ckpt_sweep, ckpt_at = None, None, None
while time.time() - t0 < 600:
    now = time.time()
    state = subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True,
                           text=True).stdout.strip()
    if state != "RUNNING" and completing is None:
        completing = now
    if stop_line is None:
        with open(log, errors="replace") as f:
            m = stop_re.search(f.read())
        if m:
            stop_line, stopped_at = m, now
    try:
        with np.load(ckpt) as z:
            s = int(z["sweep"])
        if s != ckpt_sweep:
            ckpt_sweep, ckpt_at = s, now
    except (OSError, KeyError, ValueError, EOFError):
        pass
    if not state:
        gone = now
        break
    time.sleep(0.1)
fmt = lambda t: "never" if t is None else f"{t - t0:.1f} s"
print(f"job {job} after the scancel: COMPLETING {fmt(completing)}, left squeue {fmt(gone)}; "
      f"checkpoint at sweep {ckpt_sweep} {fmt(ckpt_at)}; the log's SIGTERM line {fmt(stopped_at)}"
      + (f": {stop_line.group(0)}" if stop_line else ""))
print(stop_line.group(1) if stop_line else "none")
sys.exit(0 if gone is not None else 1)
PY
}
