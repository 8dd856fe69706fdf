#!/usr/bin/env bash
# On the real Slurm of setup.sh: the refinement chain as one Slurm job
# of 2 tasks (refine.workers: 2; the rule asks for 2 tasks and its script starts one
# TensorFlow worker per task with srun) writes the refined model of refine.workers: 1,
# bit for bit. The Slurm counterpart of
# tests/test_workflow_config.py::test_refinement_on_two_local_workers_writes_the_one_process_model
# (local worker processes); not in the test suite: it needs the testbed.
#   profiles/slurm/testbed/setup.sh                       # once, as root
#   nice -n 15 profiles/slurm/testbed/two_tasks.sh /tmp/two_tasks
# Prints the Slurm job ids, the refine job's tasks (sacct -c), the log's worker line and
# "identical" (or the arrays that differ); exits non-zero on any failure.
set -euo pipefail
NAME=two_tasks
source "$(dirname "$0")/common.sh"

WORK=$(new_work "${1:?usage: two_tasks.sh <work folder, new or empty>}")
TARGET=results/mnist_smoke/refine/model.npz
LOG=results/logs/refine/mnist_smoke.log

# The smoke config on generated offline data, small (100 images, refinement in chunks of
# 20), once with 1 worker and once with 2.
for w in 1 2; do
    (cd "$REPO/tests" && python -c "
import sys; sys.path.insert(0, '.')
from pathlib import Path
import yaml
from _workflow import smoke_config, write_config
p = smoke_config(Path('$WORK'), n_images=100, burn_in=4, collect=2)
c = yaml.safe_load(Path(p).read_text())
c['datasets']['mnist_smoke']['refine'].update(chunk=20, workers=$w)
write_config(Path('$WORK') / 'workers$w.yaml', c)")
    copy_tree "$WORK/w$w"
done

for w in 1 2; do
    say "refine.workers: $w in $WORK/w$w"
    smk "$WORK/w$w" "$WORK/workers$w.yaml" "$TARGET" >"$WORK/w$w.out" 2>&1 ||
        { tail -40 "$WORK/w$w.out"; tail -40 "$WORK/w$w/$LOG" || true; die "run with $w worker(s)"; }
    IDS=$(job_ids "$WORK/w$w.out")
    say "jobs: $IDS"
    # the last job is the refinement (job names are the executor's UUIDs)
    sacct -c -j "${IDS##*,}" -o JobID,NCPUS,State,Elapsed 2>/dev/null || true
done

grep -m1 "refining with 2 workers" "$WORK/w2/$LOG" >/dev/null || die "no 'refining with 2 workers' in $WORK/w2/$LOG"
say "log: $(grep -m1 'refining with 2 workers' "$WORK/w2/$LOG")"
python - "$WORK/w1/$TARGET" "$WORK/w2/$TARGET" <<'EOF' || die "arrays differ"
import sys
import numpy as np
skip = {"wall_seconds", "chain_seconds", "refine_config"}  # timings; the config names its workers
with np.load(sys.argv[1]) as a, np.load(sys.argv[2]) as b:
    keys = sorted(set(a.files) - skip)
    bad = [k for k in keys if k not in b.files or not np.array_equal(a[k], b[k])]
print("two_tasks: " + (f"identical: {len(keys)} arrays ({', '.join(keys[:6])}, ...)" if not bad
                       else "differ: " + ", ".join(bad)))
sys.exit(1 if bad else 0)
EOF
say "passed in $(( $(date +%s) - T0 )) s"
