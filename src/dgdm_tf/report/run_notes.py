"""The notes under a table of ``results/tables.md``: one line per run with the settings it
used, read from its ``metrics.json`` (:func:`run_note`)."""

from __future__ import annotations

from typing import Any, Mapping

from dgdm_tf.report.runs import BLOCK_METHOD, ENCODER_METHOD


def run_note(ds: str, method: str, m: Mapping[str, Any]) -> str:
    """One line with the settings a run used, read from its metrics.json."""
    if method == "cnn":
        return _cnn_note(m)
    if method == ENCODER_METHOD:
        return _encoder_note(m)
    if method == BLOCK_METHOD:
        return _block_note(m)
    if method in ("mcem_map", "model_averaging", "imagenet_transfer"):
        return _mcem_note(method, m)
    cfg = m.get("config", {}) or {}
    bits = []
    sup = cfg.get("supervised") or {}
    if method == "supervised" and sup:
        pr = sup.get("predict") or {}
        bits.append(
            f"Gibbs over every layer and the SVM jointly on {m.get('n_train')} labelled images "
            f"from the {sup.get('start_from')} dictionaries, {sup.get('burn_in')} burn-in + "
            f"{sup.get('collect')} x {sup.get('thin')} collection sweeps; test: "
            + (f"posterior mean of the top layer ({pr.get('burn_in')} burn-in + "
               f"{pr.get('collect')} Gibbs sweeps"
               + (f" per chain, {pr['chains']} chains averaged" if int(pr.get("chains") or 1) > 1 else "")
               + ")" if pr.get("features") == "gibbs" else
               f"MCEM MAP of the top layer (Algorithm 2: {pr.get('burn_in')} Gibbs sweeps, then "
               f"MCEM iterations to tol {pr.get('tol')}, at most {pr.get('iterations')})")
            + f", decision values averaged over {m.get('n_models_averaged')} models")
        if m.get("per_model_test_error_pct"):
            bits.append("test error of each model alone: "
                        + ", ".join(f"{e:.2f}%" for e in m["per_model_test_error_pct"]))
        mm = m.get("train_test_mismatch")
        if mm:
            bits.append(f"its first {mm['images']} training images by the test route (no labels): "
                        f"error {mm['train_error_test_route_pct']:.2f}% (the chain's own features: "
                        f"{mm['train_error_chain_pct']:.2f}%)")
    pre = cfg.get("pretrain") or {}
    ref = cfg.get("refine") or {}
    if method == "unsupervised_svm" and ref:
        td = cfg.get("topdown_features") or {}
        bits.append(
            f"joint refinement of all layers on {m.get('refine_n_images', ref.get('n_images'))} "
            f"images, {ref.get('burn_in')} burn-in + {ref.get('collect')} x {ref.get('thin')} "
            f"collection sweeps; top-down features: {_topdown_sweeps(td)}")
    if pre:
        tempered = round(float(pre.get("anneal_fraction") or 0) * int(pre.get("burn_in") or 0))
        bits.append(
            f"pretraining on {m.get('pretrain_n_images', pre.get('n_images'))} images, "
            f"{pre.get('burn_in')} burn-in + {pre.get('collect')} collection sweeps per layer"
            + (f" (the first {tempered} burn-in sweeps tempered)" if tempered else ""))
    feat = cfg.get("features") or {}
    if feat and method not in ("unsupervised_svm", "supervised"):
        if feat.get("route", "layerwise") == "topdown":
            td = cfg.get("topdown_features") or {}
            bits.append("features: the top layer given the whole pretrained model (test-time "
                        f"top-down chain, {_topdown_sweeps(td)})")
        else:
            chains = int(feat.get("chains") or 1)
            bits.append(f"features: each layer's chain on the layer below, {feat.get('burn_in')} "
                        f"burn-in + {feat.get('collect')} collection sweeps"
                        + (f", {chains} chains per image averaged" if chains > 1 else ""))
    svm = cfg.get("svm") or {}
    if svm and method != "supervised":
        bits.append(f"SVM: {svm.get('burn_in')} burn-in + {svm.get('collect')} collection")
    if m.get("dict_sizes") is not None:
        bits.append("dictionary sizes kept per layer: "
                    + ", ".join(str(k) for k in m["dict_sizes"]))
    if m.get("train_error_pct") is not None:
        bits.append(f"train error {m['train_error_pct']:.2f}%")
    if m.get("pretrained_same_subset_test_error_pct") is not None:
        bits.append("the same SVM on the pretrained features of the same images: test error "
                    f"{m['pretrained_same_subset_test_error_pct']:.2f}%")
    return f"`{method}` ran with " + "; ".join(bits) + "." if bits else ""


#: the rows whose label says what they ran (:func:`row_recipe`): the paper's three
PAPER_ROWS = ("pretrained_svm", "unsupervised_svm", "supervised")


def row_recipe(method: str, m: Mapping[str, Any]) -> str:
    """What a paper row ran, for its label in the table: the model's gamma_s, the test
    features' route, (supervised) the models averaged and "not settled" while the chain
    that trained its model still drifts ("too short to tell" for one too short to judge) (metrics.json's ``chain``,
    :func:`dgdm_tf.mcmc.diagnostics.trace_settlement`), from its metrics.json ("" for
    other rows)."""
    if method not in PAPER_ROWS:
        return ""
    cfg = m.get("config", {}) or {}
    kind = (m.get("hyper") or {}).get("gamma_s", "image_map")
    bits = ["gamma_s per image and map" if kind == "image_map" else "one global gamma_s"]
    if method == "supervised":
        pr = (cfg.get("supervised") or {}).get("predict") or {}
        route = ("alg2" if pr.get("features") == "mcem" else "chain", pr.get("tol"), pr.get("iterations"), pr)
    elif method == "pretrained_svm" and (cfg.get("features") or {}).get("route") != "topdown":
        route = ("layerwise", None, None, cfg.get("features") or {})
    else:
        td = cfg.get("topdown_features") or {}
        a = td.get("alg2") or {}
        route = (td.get("route", "chain"), a.get("tol"), a.get("max_iterations"), td)
    name, tol, its, blk = route
    if name == "alg2":
        bits.append(f"Algorithm 2 to tol {tol} (at most {its} iterations)")
    elif name == "layerwise":
        bits.append("layer-wise chains")
    elif int(blk.get("burn_in") or 0) == 0 and int(blk.get("collect") or 1) == 1:
        bits.append("first sweep" + (f", {blk.get('chains')} chains" if int(blk.get("chains") or 1) > 1 else ""))
    else:
        bits.append(f"posterior mean after {blk.get('burn_in')} + {blk.get('collect')} sweeps"
                    + (f" x {blk.get('chains')} chains" if int(blk.get("chains") or 1) > 1 else ""))
    if method == "supervised":  # the one row that averages models' decision values
        n_models = int(m.get("n_models_averaged") or 1)
        bits.append(f"{n_models} model{'s' if n_models > 1 else ''} averaged")
    subsets = _model_subsets(method, m)
    if subsets:
        bits.append(subsets)
    chain = m.get("chain") or {}
    if chain.get("settled") is False:  # its model is a draw of the chain's transient
        drifting = chain.get("drifting") or []
        bits.append(f"not settled: {len(drifting)} of {len(chain.get('scalars') or {})} traced "
                    f"scalars still drift ({', '.join(drifting[:2])}{', ...' if len(drifting) > 2 else ''})")
    elif chain and chain.get("settled") is None and "n_sweeps" in chain:  # too short to judge
        bits.append(f"chain of {chain['n_sweeps']} sweeps, too short to tell whether it settled")
    return "; ".join(bits)


def _topdown_sweeps(td: Mapping[str, Any]) -> str:
    """The test-time top-down chains' schedule of a ``topdown_features`` block."""
    if td.get("route") == "alg2":
        a = td.get("alg2") or {}
        return (f"Algorithm 2, {a.get('burn_in')} Gibbs sweeps then MCEM iterations until each image's "
                f"Q changes by at most {a.get('tol')} of itself (at most {a.get('max_iterations')})")
    chains = int(td.get("chains") or 1)
    return (f"{td.get('burn_in')} burn-in + {td.get('collect')} collection sweeps"
            + (f" per chain, {chains} chains per image averaged" if chains > 1 else ""))


def _mcem_note(method: str, m: Mapping[str, Any]) -> str:
    """The large-data route's settings (stochastic MCEM, averaging, transfer)."""
    cfg = m.get("config", {}) or {}
    if method == "imagenet_transfer":
        t = cfg.get("transfer") or {}
        svm = cfg.get("svm") or {}
        return (f"`imagenet_transfer` ran with the layers of `{m.get('source')}` (its MCEM "
                f"estimate) fixed, images at {m.get('image_size')}x{m.get('image_size')}, "
                f"MCEM MAP features ({t.get('burn_in')} Gibbs sweeps, then "
                f"{t.get('iterations')} MCEM iterations), a new Bayesian SVM "
                f"({svm.get('burn_in')} burn-in + {svm.get('collect')} collection); accuracy "
                f"averaged over classes; train error {m.get('train_error_pct', float('nan')):.2f}%.")
    mc = cfg.get("mcem") or {}
    pr = cfg.get("mcem_predict") or {}
    text = (f"`{method}` ran with stochastic MCEM from the priors on {m.get('n_train')} images "
            f"({mc.get('iterations')} iterations of batch {mc.get('batch_size')}, "
            f"{mc.get('sweeps')} Gibbs sweeps per E-step); test: MCEM MAP of the top layer "
            f"({pr.get('burn_in')} Gibbs sweeps, then {pr.get('iterations')} MCEM iterations)")
    if method == "model_averaging":
        av = cfg.get("averaging") or {}
        text += (f", decision values averaged over {m.get('n_models_averaged')} posterior "
                 f"samples (one every {av.get('thin')} mini-batch Gibbs iterations)")
    if m.get("test_images_per_second") is not None:
        text += f"; test-time inference {m['test_images_per_second']:.3g} image-models/s"
    return text + "."


def _encoder_note(m: Mapping[str, Any]) -> str:
    """The reference row's settings (dgdm_tf.baselines.encoder), from its metrics.json."""
    cfg = m.get("config", {}) or {}
    enc = cfg.get("encoder") or {}
    pre = cfg.get("pretrain") or {}
    svm = cfg.get("svm") or {}
    layers = (cfg.get("model") or {}).get("layers") or [{}]
    p = layers[0].get("pool")
    k = (m.get("dict_sizes") or [None])[0]
    bits = [f"pretraining's layer-1 dictionary ({k} elements kept; pretrained on "
            f"{m.get('pretrain_n_images', pre.get('n_images'))} images, "
            f"{pre.get('burn_in')} burn-in + {pre.get('collect')} collection sweeps)",
            "no sampling: soft-threshold encoder (Coates & Ng 2011; correlation with each "
            f"unit-norm element, max(c - {enc.get('alpha')}, 0) and max(-c - "
            f"{enc.get('alpha')}, 0), {p}x{p} max-pool) giving {m.get('n_features')} features",
            _encoder_svm_text(m, enc, svm)]
    if m.get("train_error_pct") is not None:
        bits.append(f"train error {m['train_error_pct']:.2f}%")
    return f"`{ENCODER_METHOD}` (ours, not in the paper) ran with " + "; ".join(bits) + "."


def _encoder_svm_text(m: Mapping[str, Any], enc: Mapping[str, Any],
                      svm: Mapping[str, Any]) -> str:
    """How the reference row's SVM was fitted: ``encoder.svm_method`` (recorded by the
    svm rule as ``svm_method``), the model and prior / hinge settings of `svm`."""
    method = m.get("svm_method") or enc.get("svm_method") or svm.get("method") or "gibbs"
    steps = m.get("svm_iterations")
    if method == "em":
        bits = ([f"{steps} steps"] if steps is not None else [])
        rel = m.get("svm_em_last_rel_decrease")
        if rel is not None:
            bits.append(f"the objective's last relative decrease {rel:.2g}")
        if m.get("svm_em_solver") == "cg":
            its = m.get("svm_cg_iterations")
            bits.append("each step solved by conjugate gradients to "
                        f"{svm.get('em_cg_tol')} of its starting residual (first step "
                        f"{svm.get('em_cg_start_tol')}"
                        + (f"; {its} iterations in all" if its is not None else "") + ")")
        how = "EM towards its MAP" + (f" ({', '.join(bits)})" if bits else "")
        return (f"the SVM model of `pretrained_svm` (same prior and hinge settings) fitted "
                f"by {how} (`encoder.svm_method: em`; `pretrained_svm`: "
                f"{svm.get('method', 'gibbs')}), on its images")
    return (f"the SVM of `pretrained_svm` fitted by Gibbs ({svm.get('burn_in')} burn-in + "
            f"{svm.get('collect')} collection) on its images")


def _block_note(m: Mapping[str, Any]) -> str:
    """The block-posterior row's settings (dgdm_tf.pretrain.block_posterior), from its metrics.json."""
    cfg = m.get("config", {}) or {}
    blk = cfg.get("block_features") or {}
    svm = cfg.get("svm") or {}
    bits = [f"the pretrained layers of `pretrained_svm` ({m.get('dict_sizes')} elements kept)",
            "no sampling: each block's posterior mean given the image alone (every other "
            f"block off, theta at the chains' start, {blk.get('off')} on off; the pretrained "
            "D, gamma_w and mean gamma_e), layer by layer, giving "
            f"{m.get('n_features')} features",
            f"the SVM of `pretrained_svm` ({svm.get('burn_in')} burn-in + "
            f"{svm.get('collect')} collection) on its images; why: docs/findings/explaining_away_readout.md"]
    if m.get("train_error_pct") is not None:
        bits.append(f"train error {m['train_error_pct']:.2f}%")
    return f"`{BLOCK_METHOD}` (ours, not in the paper) ran with " + "; ".join(bits) + "."


def _cnn_note(m: Mapping[str, Any]) -> str:
    """The CNN baseline's settings and its best epoch, from its metrics.json."""
    cfg = m.get("config", {}) or {}
    c = cfg.get("cnn") or {}
    layers = (cfg.get("model") or {}).get("layers") or []
    convs = ", ".join(f"{L['dict_size']}x{L['dict_size']}x{L['n_dict']}"
                      + (f" + {L['pool']}x{L['pool']} max-pool" if L.get("pool", 1) > 1 else "")
                      for L in layers)
    bits = [f"conv {convs}" if convs else "",
            f"2 FC {c.get('fc_units')} with dropout {c.get('dropout')}",
            f"Adam {c.get('learning_rate')}, batch {c.get('batch_size')}, "
            f"{len(m.get('curve') or [])} epochs"]
    if m.get("best_test_error_pct") is not None:
        bits.append(f"best test error {m['best_test_error_pct']:.2f}% "
                    f"(epoch {m.get('best_epoch')}; the row shows the last epoch)")
    if m.get("train_error_pct") is not None:
        bits.append(f"train error {m['train_error_pct']:.2f}%")
    return "`cnn` ran with " + "; ".join(b for b in bits if b) + "."


def _model_subsets(method: str, m: Mapping[str, Any]) -> str:
    """The images a paper row's dictionaries were learned on where they are fewer than
    the row's training images (pretraining's and refinement's own subsets), for its
    label: "layers pretrained on 1000, refined on 1000 of 60000 images"; "" otherwise."""
    cfg = m.get("config", {}) or {}
    n = m.get("n_train")
    pre = m.get("pretrain_n_images", (cfg.get("pretrain") or {}).get("n_images"))
    refined = method == "unsupervised_svm" or (
        method == "supervised" and (cfg.get("supervised") or {}).get("start_from") == "refined")
    ref = m.get("refine_n_images", (cfg.get("refine") or {}).get("n_images")) if refined else None
    sizes = [("pretrained", pre), ("refined", ref)]
    if n is None or all(k is None or int(k) >= int(n) for _, k in sizes):
        return ""
    told = [f"{what} on {int(k)}" for what, k in sizes if k is not None]
    own = " (then its chain on all of them)" if method == "supervised" else ""
    return f"layers {', '.join(told)} of {int(n)} images{own}"
