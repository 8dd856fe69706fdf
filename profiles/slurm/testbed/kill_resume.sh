#!/usr/bin/env bash
# On the real Slurm of setup.sh: a pretraining job killed mid-chain
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
NAME=kill_resume
source "$(dirname "$0")/common.sh"

WORK=$(new_work "${1:?usage: kill_resume.sh <work folder, new or empty>}")
TARGET=results/mnist_smoke/pretrain/layer1.npz
CKPT=results/mnist_smoke/pretrain/layer1_ckpt/checkpoint.npz
LOG=results/logs/pretrain_layer/mnist_smoke/layer1.log
RESUMED="resuming from checkpoint"

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

for d in ref kill; do copy_tree "$WORK/$d"; done

# ------------------------------------------------------------ 1. uninterrupted
say "reference run in $WORK/ref"
smk "$WORK/ref" "$CFG" "$TARGET" >"$WORK/ref.out" 2>&1 || { tail -30 "$WORK/ref.out"; die "reference run (see $WORK/ref.out)"; }
say "reference jobs: $(job_ids "$WORK/ref.out")"

# ------------------------------------------------------------ 2. killed mid-chain
say "killed run in $WORK/kill"
smk "$WORK/kill" "$CFG" "$TARGET" >"$WORK/kill.out" 2>&1 &
SMK=$!
cancel_mid_chain "$WORK/kill" "$CKPT" "$SMK" 16 "$TARGET"

# The profile's `retries: 1` resubmits the cancelled job by itself (attempt 2), which
# resumes from the checkpoint: the checkpoint folder is not an output, so snakemake
# leaves it. Should snakemake give up instead, rerun it as a restarted run would.
if wait "$SMK"; then
    say "snakemake resubmitted the job itself (retries: 1)"
else
    say "snakemake exited non-zero; unlock and rerun with --rerun-incomplete"
    smk "$WORK/kill" "$CFG" --unlock >>"$WORK/kill.out" 2>&1
    smk "$WORK/kill" "$CFG" "$TARGET" --rerun-incomplete >"$WORK/rerun.out" 2>&1 ||
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
