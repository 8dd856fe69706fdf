#!/usr/bin/env bash
# Issue 48, item 3, on the real Slurm of setup.sh: a pretraining job killed mid-chain
# (scancel, as a pre-emption would) and resubmitted resumes from its checkpoint and ends
# with the dictionaries of an uninterrupted run. The Slurm counterpart of
# tests/test_workflow_config.py::test_killed_pretraining_resumes_to_the_same_dictionaries
# (which kills a local snakemake); not in the test suite: it needs the testbed and
# takes about 5 min.
#   profiles/slurm/testbed/setup.sh                       # once, as root
#   nice -n 15 profiles/slurm/testbed/kill_resume.sh /tmp/kill_resume
# Prints the Slurm job ids, the checkpoint's sweep at the kill, the log's resume line and
# "identical" (or the arrays that differ); exits non-zero on any failure.
set -euo pipefail

WORK=${1:?usage: kill_resume.sh <work folder, new or empty>}
REPO=$(cd "$(dirname "$0")/../../.." && pwd)
TARGET=results/mnist_smoke/pretrain/layer1.npz
CKPT=results/mnist_smoke/pretrain/layer1_ckpt/checkpoint.npz
LOG=results/logs/pretrain_layer/mnist_smoke/layer1.log
RESUMED="resuming from checkpoint"
T0=$(date +%s)

say() { printf 'kill_resume: %s\n' "$*"; }
die() { printf 'kill_resume: FAILED: %s\n' "$*" >&2; exit 1; }

# A stale results/ would let snakemake skip the very jobs this is about.
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
[ -z "$(ls -A "$WORK")" ] || die "$WORK is not empty"
scontrol ping >/dev/null 2>&1 || die "no slurmctld: run profiles/slurm/testbed/setup.sh"

# The smoke config of the local test on generated offline data (no download): 100
# images, 12 + 4 sweeps, a checkpoint every 2. batch_size None: the chain with every
# image in memory, checkpointed to checkpoint.npz (with a batch_size it streams and
# checkpoints to stream/head.npz instead).
CFG=$(cd "$REPO/tests" && python -c "
import sys; sys.path.insert(0, '.')
from pathlib import Path
from _workflow import smoke_config
print(smoke_config(Path('$WORK'), n_images=100, burn_in=12, collect=4, checkpoint_every=2,
                   batch_size=None))")

# Two copies of the working tree (what tests/_workflow.copy_repo copies), so that the
# reference and the killed run share no results/ and no .snakemake/.
for d in ref kill; do
    mkdir -p "$WORK/$d"
    tar -C "$REPO" --exclude=.snakemake --exclude=__pycache__ --exclude='*.egg-info' \
        -cf - Snakefile workflow config profiles src pyproject.toml | tar -C "$WORK/$d" -xf -
done

# threads=1: both runs ask Slurm for the same CPUs whatever the config says, so their
# chains see the same thread count.
smk() {  # smk <dir> <snakemake args...>: the cluster run, as the README gives it
    local dir=$1; shift
    # exec: $! of a background smk is then snakemake's own pid
    (cd "$dir" && exec env TF_CPP_MIN_LOG_LEVEL=2 PYTHONDONTWRITEBYTECODE=1 nice -n 15 \
        python -m snakemake --profile profiles/slurm --workflow-profile profiles/slurm-testbed \
        "$@" --configfile "$CFG" --config threads=1)
}
job_ids() { grep -ho 'submitted with SLURM jobid [0-9]*' "$@" | awk '{print $NF}' | paste -sd, -; }

# ------------------------------------------------------------ 1. uninterrupted
say "reference run in $WORK/ref"
smk "$WORK/ref" "$TARGET" >"$WORK/ref.out" 2>&1 || { tail -30 "$WORK/ref.out"; die "reference run (see $WORK/ref.out)"; }
say "reference jobs: $(job_ids "$WORK/ref.out")"

# ------------------------------------------------------------ 2. killed mid-chain
say "killed run in $WORK/kill"
smk "$WORK/kill" "$TARGET" >"$WORK/kill.out" 2>&1 &
SMK=$!
# One python process polls (every 0.05 s: the chain runs ~0.2 s a sweep here, so a
# slower poll can miss the window) until the checkpoint holds sweep >= 2; the file is
# replaced atomically, a read that fails is retried.
SWEEP=$(python - "$WORK/kill/$CKPT" "$SMK" <<'EOF'
import os, sys, time
import numpy as np
path, pid = sys.argv[1], int(sys.argv[2])
deadline = time.time() + 900
while time.time() < deadline:
    try:
        os.kill(pid, 0)
    except OSError:
        sys.exit("snakemake ended before the checkpoint reached sweep 2")
    try:
        with np.load(path) as z:
            sweep = int(z["sweep"])
        if sweep >= 2:
            print(sweep)
            sys.exit(0)
    except (OSError, KeyError, ValueError, EOFError):
        pass
    time.sleep(0.05)
sys.exit("no checkpoint with sweep >= 2 within 900 s")
EOF
) || { kill "$SMK" 2>/dev/null; die "poll"; }
# The running job of this copy (its working directory), from squeue, as an operator
# would find it.
LINE=$(squeue -h -t RUNNING -o '%i %j %T %M %Z' | awk -v d="$WORK/kill" '$5 == d')
JOB=$(awk '{print $1}' <<<"$LINE")
[ -n "$JOB" ] || { kill "$SMK"; die "no running job of $WORK/kill in squeue"; }
scancel "$JOB"
say "squeue before the kill: $LINE"
say "scancel $JOB at checkpoint sweep $SWEEP of 16"
[ "$SWEEP" -lt 16 ] || die "the chain had ended: not killed mid-chain"
[ ! -e "$WORK/kill/$TARGET" ] || die "$TARGET already written: not killed mid-chain"

# The profile's `retries: 1` resubmits the cancelled job by itself (attempt 2), which
# resumes from the checkpoint: the checkpoint folder is not an output, so snakemake
# leaves it. Should snakemake give up instead, rerun it as a restarted run would.
if wait "$SMK"; then
    say "snakemake resubmitted the job itself (retries: 1)"
else
    say "snakemake exited non-zero; unlock and rerun with --rerun-incomplete"
    smk "$WORK/kill" --unlock >>"$WORK/kill.out" 2>&1
    smk "$WORK/kill" "$TARGET" --rerun-incomplete >"$WORK/rerun.out" 2>&1 ||
        { tail -30 "$WORK/rerun.out"; die "rerun (see $WORK/rerun.out)"; }
fi
OUTS=("$WORK/kill.out"); [ ! -e "$WORK/rerun.out" ] || OUTS+=("$WORK/rerun.out")
grep -h "SLURM status is" "${OUTS[@]}" | sed 's/^ */kill_resume: snakemake: /' || true
IDS=$(job_ids "${OUTS[@]}")
say "killed-run jobs: $IDS"
sacct -c -j "$IDS" -o JobID,JobName%12,State,ExitCode,Elapsed,End 2>/dev/null || true

# ------------------------------------------------------------ 3. checks
RESUME_LINE=$(grep -m1 "$RESUMED" "$WORK/kill/$LOG") || die "no '$RESUMED' in $WORK/kill/$LOG"
say "log: $RESUME_LINE"
python - "$WORK/ref/$TARGET" "$WORK/kill/$TARGET" <<'EOF' || die "arrays differ"
import sys
import numpy as np
with np.load(sys.argv[1]) as a, np.load(sys.argv[2]) as b:
    bad = [k for k in ("D", "kept", "usage", "x_next", "gamma_e")
           if not np.array_equal(a[k], b[k])]
print("kill_resume: " + ("identical: D, kept, usage, x_next, gamma_e" if not bad
                         else "differ: " + ", ".join(bad)))
sys.exit(1 if bad else 0)
EOF
say "passed in $(( $(date +%s) - T0 )) s"
