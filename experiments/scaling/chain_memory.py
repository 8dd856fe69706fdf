"""Where does the top-down chain's memory grow with the images? On a default run's
pretrained layers and the first N training images of its `pretrained_svm` subset, two
chunked sweeps (chunks of 250, as `refine` and `supervised` run) with the global steps
(every D, gamma_s) on or off, or one D step alone (`d0`, `d1`: two draws of D[l] on the
start state, no sweep), or the chain as the rules run it (`refine`, `supervised`:
`topdown.refine.run_refine` for 1 + 2 sweeps with the run's `refine` / `supervised`
settings); each setting in its own process, which prints its peak RSS:

    python experiments/scaling/chain_memory.py results/mnist 500 1500
    python experiments/scaling/chain_memory.py results/mnist 500 1500 --settings d0 d1
    python experiments/scaling/chain_memory.py results/mnist 500 1500 --settings refine supervised
    python experiments/scaling/chain_memory.py results/mnist 1000 3000 --settings supervised-full
    python experiments/scaling/chain_memory.py results/mnist 2000 6000 --chunk 2000 --settings supervised

(`--chunk C`: the chains' chunk instead of the run's, e.g. `config/paper.yaml`'s 2000;
with `d0`, `d1` the D step reads the images C at a time, as the chunked chains run it.)

(`-full`: the rule's burn-in, collection and checkpoints instead of 1 + 2 sweeps.)

If the peak grows with N only when the globals are on, the memory is in the D steps,
which see every image in one compiled call; the per-image state is small.
"""
import os
import resource
import subprocess
import sys
import time

root = sys.argv[1]
if len(sys.argv) > 2 and sys.argv[2] == "--one":
    n, setting, chunk = int(sys.argv[3]), sys.argv[4], sys.argv[5]
    import numpy as np
    import tensorflow as tf

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "mixing"))
    from _subsets import topdown_start
    from dgdm_tf.core.compiled import compiled
    from dgdm_tf.topdown.dictionaries import resample_d
    from dgdm_tf.topdown.sweep import make_sweep_fn

    # the start in chunks (as the rules build it), so its peak does not hide the chain's
    resolved, z, ds, x, y, model, xt, st = topdown_start(root, n, 250)
    layers = resolved["block"]["model"]["layers"]
    full = setting.endswith("-full")  # the rule's sweeps and checkpoints, not 1 + 2 sweeps
    setting = setting.removesuffix("-full")
    if setting in ("refine", "supervised"):
        import tempfile

        from dgdm_tf.topdown.refine import run_refine

        import yaml

        cfg = yaml.safe_load(open(f"{root}/supervised/config.yaml"))["block"][setting]
        sweeps = dict(burn_in=1, collect=2)
        if full:
            sweeps = dict(burn_in=int(cfg["burn_in"]), collect=int(cfg["collect"]),
                          thin=int(cfg["thin"]), checkpoint_dir=tempfile.mkdtemp(),
                          checkpoint_every=int(cfg["checkpoint_every"]))
        kw = {}
        if setting == "supervised":
            kw = dict(labels=y["train"], n_classes=10, keep_models=2,
                      svm_hyper={**{k: cfg[k] for k in ("gamma", "a_kappa", "b_kappa", "kappa",
                                                      "bias_var", "scale")},
                                 "steps": int(cfg["svm_steps"])},
                      svm_warmup=int(cfg["svm_warmup"]), svm_average=int(cfg["svm_average"]))
        t = time.perf_counter()
        chunk = int(cfg["chunk"]) if chunk == "run" else int(chunk)
        out = run_refine(x["train"], ds, layers, seed=0, chunk=chunk, **sweeps,
                   gamma_e_init=float(np.mean(z[0]["gamma_e"])), gamma_s_init=float(z[-1]["gamma_w"]),
                   scan=cfg["scan"], progress=None, **kw)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        times = " / ".join(f"{r['seconds']:.1f}" for r in out["trace"])
        print(f"{n} images, {setting}{' (the rule: ' + str(sweeps) + ')' if full else ''}, "
              f"chunks of {chunk}: "
              f"peak RSS {rss:.0f} MB ({time.perf_counter() - t:.0f} s, sweeps of {times} s)",
              flush=True)
        sys.exit(0)
    if setting in ("on", "off"):
        sweep_fn = make_sweep_fn(model, chunk=250 if chunk == "run" else int(chunk),
                                 update_globals=setting == "on", adapt=False)
        fn = lambda st: sweep_fn(st, xt)
    else:
        l = int(setting[1:])
        fn = compiled(lambda st: resample_d(st, xt, model, l, tf.constant([3, l]),
                                            chunk=None if chunk == "run" else int(chunk)))
    t = time.perf_counter()
    for _ in range(2):
        st, _ = fn(st)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{n} images, {setting}: peak RSS {rss:.0f} MB "
          f"({time.perf_counter() - t:.0f} s for 2 calls)", flush=True)
    sys.exit(0)
args = sys.argv[2:]
settings = ["off", "on"]
chunk = "run"
if "--chunk" in args:
    i = args.index("--chunk")
    chunk, args = args[i + 1], args[:i] + args[i + 2:]
if "--settings" in args:
    i = args.index("--settings")
    args, settings = args[:i], args[i + 1:]
for n in args:
    for g in settings:
        out = subprocess.run([sys.executable, __file__, root, "--one", n, g, chunk],
                             capture_output=True, text=True)
        print(out.stdout.strip() or out.stderr[-2000:], flush=True)
