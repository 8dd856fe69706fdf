#!/usr/bin/env bash
# On the real Slurm of setup.sh: the whole smoke config, end to end to
# results/tables.md, through `--profile profiles/slurm` (every rule an sbatch job). On the
# way the refinement runs as one Slurm job of 2 tasks (refine.workers: 2) and is
# scancel'led mid-chain, as a pre-emption would; the profile's `retries: 1` resubmits it
# and it resumes from its checkpoint. A second copy then runs the same refinement
# uninterrupted, on the first copy's data and pretrained layers, and the two refined
# models must be equal bit for bit. Not in the test suite: it needs the testbed and takes
# about half an hour on 2 cores.
#   profiles/slurm/testbed/setup.sh                       # once, as root
#   nice -n 15 profiles/slurm/testbed/smoke.sh /tmp/slurm_smoke
# Prints the job count, the refine jobs (sacct -c), the sweep at the kill, the seconds
# the cancelled job took to leave and the sweep its chain stopped after (it must stop
# within one sweep, docs/findings/sigterm_exit.md), the log's worker and resume lines (the resubmission must
# resume there), "identical" (or the arrays that differ) and the MNIST table; exits
# non-zero on any failure.
set -euo pipefail
NAME=smoke
source "$(dirname "$0")/common.sh"

WORK=$(new_work "${1:?usage: smoke.sh <work folder, new or empty>}")
DS=results/mnist_smoke
REFINED=$DS/refine/model.npz
CKPT=$DS/refine/ckpt/checkpoint.npz
LOG=results/logs/refine/mnist_smoke.log
SWEEPS=60

# config/smoke.yaml on generated offline data (tests/_workflow.smoke_config), with the
# refinement on 2 workers (chunks of 20 of its 40 images) and 58 + 2 sweeps of about a
# second: the smoke's 2 + 2 leave no room for a kill, and with 8 + 2 the chain finished
# in the 20 s the cancel took to reach the 2-task job step on the loaded testbed.
CFG=$WORK/smoke_slurm.yaml
(cd "$REPO/tests" && python -c "
import sys; sys.path.insert(0, '.')
from pathlib import Path
import yaml
from _workflow import smoke_config, write_config
c = yaml.safe_load(Path(smoke_config(Path('$WORK'))).read_text())
c['datasets']['mnist_smoke']['refine'].update(workers=2, chunk=20, burn_in=$SWEEPS - 2, collect=2, checkpoint_every=2)
write_config(Path('$CFG'), c)")
copy_tree "$WORK/run"

# ------------------------------------------------------------ 1. the smoke run, killed once
say "smoke config through Slurm in $WORK/run"
smk "$WORK/run" "$CFG" results/tables.md >"$WORK/run.out" 2>&1 &
SMK=$!
cancel_mid_chain "$WORK/run" "$CKPT" "$SMK" "$SWEEPS" "$REFINED" "$LOG"
# Slurm sends SIGTERM to every task of the job's steps, the chain's 2
# workers among them; they finish the sweep they are in, write the checkpoint and exit 143,
# before KillWait's SIGKILL (30 s).
LEAVE=$(watch_leave "$CANCEL_JOB" "$CANCEL_AT" "$WORK/run/$CKPT" "$WORK/run/$LOG") ||
    { printf '%s\n' "$LEAVE"; die "job $CANCEL_JOB still in squeue 600 s after the scancel"; }
say "$(head -1 <<<"$LEAVE")"
STOPPED=$(tail -1 <<<"$LEAVE")
[ "$STOPPED" != none ] || die "the chain's log has no 'SIGTERM: stopped after sweep' line: the workers did not stop on the signal"
say "cancelled in sweep $(( CANCEL_SWEEP + 1 )) (sweep $CANCEL_SWEEP done), stopped after sweep $STOPPED"
[ "$STOPPED" -le $(( CANCEL_SWEEP + 1 )) ] || die "the chain went on for $(( STOPPED - CANCEL_SWEEP )) sweeps after the scancel, not within one"
if wait "$SMK"; then
    say "snakemake resubmitted the job itself (retries: 1) and finished"
else
    say "snakemake exited non-zero; unlock and rerun with --rerun-incomplete"
    smk "$WORK/run" "$CFG" --unlock >>"$WORK/run.out" 2>&1
    smk "$WORK/run" "$CFG" results/tables.md --rerun-incomplete >"$WORK/rerun.out" 2>&1 ||
        { tail -30 "$WORK/rerun.out"; die "rerun (see $WORK/rerun.out)"; }
fi
OUTS=("$WORK/run.out"); [ ! -e "$WORK/rerun.out" ] || OUTS+=("$WORK/rerun.out")
IDS=$(job_ids "${OUTS[@]}")
say "$(tr ',' '\n' <<<"$IDS" | wc -l) Slurm jobs: $IDS"
say "jobs that ran 2 CPUs (sacct -c):"
sacct -c -j "$IDS" -o JobID,NCPUS,State,Elapsed 2>/dev/null | awk 'NR <= 2 || $2 == 2' || true
WORKERS=$(grep -m1 "refining with 2 workers" "$WORK/run/$LOG") || die "no 'refining with 2 workers' in $LOG"
RESUMED=$(grep -m1 "resuming refinement from checkpoint" "$WORK/run/$LOG") || die "no 'resuming refinement from checkpoint' in $LOG"
say "log: $WORKERS"
say "log: $RESUMED"
grep "resuming refinement from checkpoint at sweep $STOPPED/$SWEEPS " <<<"$RESUMED" >/dev/null ||
    die "the resubmission did not resume at sweep $STOPPED, where the cancelled job stopped"
say "the cancelled job in the completion log (sacct -c; its End is the scancel's time):"
sacct -c -j "$CANCEL_JOB" -o JobID,NCPUS,State,Start,End,Elapsed 2>/dev/null || true
SLOG=$(find "$WORK/run/.snakemake/slurm_logs" -name "$CANCEL_JOB.log" | head -1)
[ -z "$SLOG" ] || grep -h "CANCELLED\|Exited\|Killed\|forcing" "$SLOG" | sed "s/^/$NAME: job $CANCEL_JOB's log: /" || true

# ------------------------------------------------------------ 2. the refinement, uninterrupted
# The first copy's data and pretrained layers (timestamps kept, so snakemake reruns
# nothing upstream), then the refinement alone.
copy_tree "$WORK/ref"
mkdir -p "$WORK/ref/$DS"
cp -a "$WORK/run/$DS/data" "$WORK/run/$DS/pretrain" "$WORK/ref/$DS/"
say "the same refinement, uninterrupted, in $WORK/ref"
smk "$WORK/ref" "$CFG" "$REFINED" --allowed-rules refine >"$WORK/ref.out" 2>&1 ||
    { tail -30 "$WORK/ref.out"; die "uninterrupted refinement (see $WORK/ref.out)"; }
python - "$WORK/ref/$REFINED" "$WORK/run/$REFINED" <<'PY' || die "the refined models differ"
import sys
import numpy as np
skip = {"wall_seconds", "chain_seconds"}  # timings
with np.load(sys.argv[1]) as a, np.load(sys.argv[2]) as b:
    keys = sorted(set(a.files) - skip)
    bad = [k for k in keys if k not in b.files or not np.array_equal(a[k], b[k])]
print("smoke: refined model, killed and resumed vs uninterrupted: "
      + (f"identical: {len(keys)} arrays" if not bad else "differ: " + ", ".join(bad)))
sys.exit(1 if bad else 0)
PY

# ------------------------------------------------------------ 3. the table
[ -s "$WORK/run/results/tables.md" ] || die "no results/tables.md"
awk '/^## `mnist_smoke`/ {f = 1} f && /^\|/ {print; t = 1; next} t {exit}' "$WORK/run/results/tables.md" | cut -c1-160
say "passed in $(( $(date +%s) - T0 )) s"
