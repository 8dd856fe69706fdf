"""The supervised model against the unsupervised model + a separate SVM on labelled
images drawn from a tiny model. In a file of its own so that the test runner can run it
beside the other supervised tests: it trains six pipelines (about four minutes)."""

from __future__ import annotations

import numpy as np
import pytest

from dgdm_tf.supervised import joint_svm as deep_svm
from dgdm_tf.supervised.options import SvmOptions
from dgdm_tf.supervised.svm_classifier import BayesianSVM
from dgdm_tf.topdown import chain as deep_chain, refine
from dgdm_tf.topdown.options import TopdownOptions
from _labelled_toy import LAYERS, labelled_data

#: the test-time chain of both rows: one chain, the random scan, every top unit off
CHAIN = TopdownOptions(burn_in=3, collect=5, batch_size=60, chains=1, scan="random", start=None)


def supervised_against_unsupervised(seed: int) -> tuple[float, float]:
    """Test error (%) of the supervised model and of the unsupervised model + a separate
    SVM on 60 held-out images of :func:`labelled_data`, both trained by chains seeded
    ``seed`` from the same dictionaries and the same number of sweeps, both classifying
    from the posterior-mean top layer (the supervised rule's default,
    ``predict.features: gibbs``). Also run by
    docs/findings/supervised_toy_spread.md."""
    model, d, x, lab = labelled_data(180, seed=1, noise=0.6)
    top = (model.top.hs, model.top.ws, model.top.k)
    xtr, ytr, xte, yte = x[:120], lab[:120], x[120:], lab[120:]
    sweeps = dict(burn_in=8, collect=4, chunk=None)
    sup = refine.run_refine(xtr, refine.Start(d, LAYERS, n_classes=3),
                            refine.SupervisedOptions(**sweeps, scan="random", svm_steps=5,
                                                     svm_warmup=50, svm_average=0, keep_models=2),
                            seed=seed, labels=ytr, progress=None)
    errs = []
    for j in range(2):
        mp = deep_chain.infer_topdown(xte, refine.Start([v[j] for v in sup["samples"]["D"]], LAYERS,
                                                        gamma_s_init=sup["gamma_s"]),
                                      CHAIN, seed=3 + j, progress=None)
        errs.append(deep_svm.decision_values(sup["samples"]["beta"][j: j + 1], sup["svm_mean"],
                                             sup["svm_std"], mp["features"].reshape((-1,) + top)))
    err_sup = 100 * np.mean(np.mean(errs, 0).argmax(1) != yte)
    uns = refine.run_refine(xtr, refine.Start(d, LAYERS), refine.RefineOptions(**sweeps), seed=seed,
                            progress=None)
    start = refine.Start(uns["D"], LAYERS, gamma_s_init=uns["gamma_s"])
    f_tr = deep_chain.infer_topdown(xtr, start, CHAIN, seed=3, progress=None)["features"]
    f_te = deep_chain.infer_topdown(xte, start, CHAIN, seed=3, progress=None)["features"]
    clf = BayesianSVM(3, SvmOptions(burn_in=50, collect=50), seed=0).fit(f_tr, ytr)
    err_uns = 100 * np.mean(clf.predict(f_te) != yte)
    return float(err_sup), float(err_uns)


@pytest.mark.slow
def test_supervised_model_against_unsupervised_plus_svm():
    """On labelled images drawn from a tiny model (class = which top map is on), the
    supervised model classifies held-out images at least as well as the unsupervised
    model + a separate SVM (:func:`supervised_against_unsupervised`), on average over
    three chain seeds.

    It need not be strictly better: when the classes are separable in the unsupervised
    features both reach the Bayes rate, and supervision changes only the training
    features (test features are inferred without labels in both pipelines). One seed's
    difference is too noisy to test: over seeds 2, 4, 6, 8, 10 the supervised model erred
    11.7 / 3.3 / 1.7 / 1.7 / 5.0 %, the unsupervised one + SVM 1.7 / 3.3 / 1.7 / 1.7 / 8.3 %,
    and seed 2's 11.7 % was 6.7 % before the top units' images were summed in another
    order (docs/findings/supervised_toy_spread.md). So the test allows a
    5-point margin (3 of the 60 test images) on the mean of seeds 2, 4 and 6, and checks
    that every run beats chance (66.7 % error) by far.
    """
    runs = [supervised_against_unsupervised(seed) for seed in (2, 4, 6)]
    for seed, (err_sup, err_uns) in zip((2, 4, 6), runs):
        print(f"seed {seed}: test error supervised {err_sup:.1f}%, unsupervised + SVM {err_uns:.1f}%")
        assert err_sup < 30.0 and err_uns < 30.0, (seed, err_sup, err_uns)
    err_sup, err_uns = np.mean(runs, axis=0)
    assert err_sup <= err_uns + 5.0, runs
