"""Can the HMC draw of D[2] set its mass and step from less work?

Of the ~19 passes over the images a D[2] draw makes, 7 set the kernel: one Hutchinson
probe of diag H for the per-map mass and 6 power iterations for lambda_max of
M^-1/2 H M^-1/2, whose 1 / sqrt gives the step (`dgdm_tf.topdown.dictionaries.hmc_tuning`).
Neither depends on D[2], so any cheaper estimate keeps the kernel exact; what it can cost
is a step that is too bold (rejections) or too timid (D moves less a sweep). Two cheaper
estimates are tried:

* a share of the images: lambda (and with `--mass share` the mass too) from the first m
  images' Hessian, scaled up by N / m;
* fewer power iterations (`--iterations`), on every image.

On a default run's pretrained layers and the first N training images of its
`pretrained_svm` subset, after `warm` chunked sweeps from the start (chunks of 250, as the
rules run), for each setting:

* lambda_est / lambda_true: the estimate against lambda_max of the whole conditional with
  the same mass (60 power iterations on every image; two probe seeds); below 1 the step
  is bolder than the full estimate says, above 1 more timid;
* with `--mass share`: that mass against the mass from every image (per map: min / median
  / max ratio over the two seeds);
* the acceptance of 8 D[2] draws at the capped step (log step 0, the largest the burn-in
  adaptation allows), each from another seed, and the seconds of one draw (median of 8,
  after a warm-up call; the draws' kernel is the library's, its mass and step replaced by
  the setting's).

    python experiments/scaling/hmc_tuning.py results/mnist 1000 2 --mass share --shares all 500 250 125
    python experiments/scaling/hmc_tuning.py results/mnist 1000 2 --shares all 250 125
    python experiments/scaling/hmc_tuning.py results/mnist 1000 2 --iterations 1 2 3 --shares all
"""
import os
import sys
import time

import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "mixing"))
from _subsets import topdown_start  # noqa: E402

from dgdm_tf.topdown import dictionaries as dd  # noqa: E402
from dgdm_tf.topdown.state import take_images  # noqa: E402
from dgdm_tf.topdown.sweep import make_sweep_fn  # noqa: E402


def option(args, name, default):
    """(the values after --name up to the next option, the other arguments)."""
    if name not in args:
        return default, args
    i = args.index(name)
    j = next((k for k in range(i + 1, len(args)) if args[k].startswith("--")), len(args))
    return args[i + 1: j], args[:i] + args[j:]


root, n, warm = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
args = sys.argv[4:]
(mass_from,), args = option(args, "--mass", ["all"])
iterations, args = option(args, "--iterations", ["6"])
shares, args = option(args, "--shares", ["all", "250"])
reps, chunk, l = 8, 250, 1

resolved, z, ds, x, y, model, xt, st = topdown_start(root, n)
sweep_fn = make_sweep_fn(model, chunk=chunk, adapt=False)
t = time.perf_counter()
for _ in range(warm):
    st, _ = sweep_fn(st, xt)
st = st._replace(hmc_log_step=tf.zeros([model.n_layers]))  # the cap
print(f"{n} images, K = {[int(d.shape[-1]) for d in ds]}, {warm} sweeps from the start "
      f"in {time.perf_counter() - t:.0f} s", flush=True)

prior = model.hyper.dict_prior_precision
q0 = st.d[l]


def precision(m):
    """H v on the first m images (or every image), scaled up by n / m."""
    if m == "all":
        m = n
    m = int(m)
    sub = dd._Images(take_images(st, slice(0, m)), xt[:m], model, l, None,
                     chunk if chunk < m else None)
    _, dhv = dd._d_conditional(sub, model, l, st.d)
    return lambda v: (n / m) * dhv(v) + prior * v


def power(hv, mass, its, v):
    """lambda_max of M^-1/2 H M^-1/2 by ``its`` power iterations from ``v``: the loop of
    ``dd.hmc_tuning``, which takes its lambda from the same products as its mass; here
    the products may come from a share of the images while the mass reads them all."""
    sqrt_mass = tf.sqrt(mass)

    def body(i, v, lam):
        w = hv(v / sqrt_mass) / sqrt_mass
        lam = tf.norm(w)
        return i + 1, w / lam, lam

    return tf.while_loop(lambda i, *_: i < its, body, (0, v / tf.norm(v), tf.constant(1.0)))[2]


every = precision("all")
hmc_tuning = dd.hmc_tuning  # the library's, before the draws below patch the module
true_lambda = tf.function(lambda mass: power(every, mass, 60, tf.random.stateless_normal(
    tf.shape(q0), [5, 5])))
full_mass = None
for share, its in [(s_, int(k)) for s_ in shares for k in iterations]:
    hv = precision(share)

    def tuning(seed, hv=hv, its=its):
        """(mass, lambda) of this setting, from the probe seed the draw would use."""
        if mass_from == "share":
            return hmc_tuning(hv, q0, prior, seed, its)
        mass, _ = hmc_tuning(every, q0, prior, seed, 0)
        probe = tf.sign(tf.random.stateless_uniform(tf.shape(q0), seed, -1.0, 1.0))
        return mass, power(hv, mass, its, probe)

    ratios, mass_ratio = [], []
    for r in range(2):
        mass, lam = tf.function(tuning)(tf.constant([11, r]))
        if full_mass is None:
            full_mass = mass
        ratios.append(float(lam) / float(true_lambda(mass)))
        mass_ratio.append(np.asarray(mass)[0, 0, 0] / np.asarray(full_mass)[0, 0, 0])

    def draw(s, sd, tuning=tuning):
        dd.hmc_tuning = lambda _h, _q, _p, seed, _its: tuning(seed)
        try:
            return dd.resample_d(s, xt, model, l, sd, chunk=chunk)
        finally:
            dd.hmc_tuning = hmc_tuning

    draw = tf.function(draw)
    draw(st, tf.constant([0, 0]))
    acc, sec = [], []
    for r in range(reps):
        t = time.perf_counter()
        _, a = draw(st, tf.constant([1, r]))
        sec.append(time.perf_counter() - t)
        acc.append(float(a))
    mr = np.concatenate(mass_ratio)
    print(f"mass from {mass_from}, lambda from {share} images, {its} power iterations: "
          f"lambda_est / lambda_true {min(ratios):.3f}-{max(ratios):.3f}, mass / the first "
          f"setting's (per map) {mr.min():.3f} / {np.median(mr):.3f} / {mr.max():.3f}, "
          f"acceptance at the capped step {np.mean(acc):.3f} (min {np.min(acc):.3f}), "
          f"one draw {np.median(sec):.2f} s", flush=True)
