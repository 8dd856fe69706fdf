"""What every chain shares, checked on the library's source: the driver owns the schedule
(no kernel mentions burn-in or thinning), one module reads and writes checkpoints, and
no entry point of a chain or a test-time route takes more than 8 parameters."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "dgdm_tf"

#: words that belong to the schedule (mcmc.driver.Schedule), not to a kernel
SCHEDULE_WORDS = re.compile(r"burn[_ -]?in|\bthin(ning)?\b", re.I)
#: calls that read or write a file of arrays (a chain's live trace is text, not state)
FILE_IO = re.compile(r"\b(save_npz|read_npz|np\.load|np\.savez\w*)\s*\(")
CHECKPOINT_MODULE = SRC / "mcmc" / "checkpoint.py"

#: the entry points of the chains and test-time routes, and the writers of their outputs
ENTRY_POINTS = [
    "dgdm_tf.pretrain.chain.run_pretrain_layer",
    "dgdm_tf.pretrain.batched_chain.run_batched_layer",
    "dgdm_tf.pretrain.features.infer_layer",
    "dgdm_tf.pretrain.features.infer_features",
    "dgdm_tf.topdown.refine.run_refine",
    "dgdm_tf.topdown.chain.infer_topdown",
    "dgdm_tf.topdown.chain.chain_states",
    "dgdm_tf.topdown.evidence.posterior_gain",
    "dgdm_tf.mcem.stochastic.train",
    "dgdm_tf.mcem.averaging.run_averaging",
    "dgdm_tf.mcem.classify.classify",
    "dgdm_tf.mcem.test_time.infer_map",
    "dgdm_tf.mcmc.driver.run_chain",
    "dgdm_tf.mcmc.driver.run_in_memory",
    "dgdm_tf.io.artifacts.write_pretrained_layer",
    "dgdm_tf.io.artifacts.write_refined_model",
    "dgdm_tf.io.artifacts.write_supervised_model",
    "dgdm_tf.io.artifacts.write_mcem_model",
    "dgdm_tf.report.rows.write_row",
    "dgdm_tf.baselines.cnn.train_cnn",
]
MAX_PARAMETERS = 8


def _kernel_classes():
    """(module path, class name, source) of every subclass of mcmc.driver.Kernel."""
    out = []
    for path in sorted(SRC.rglob("*.py")):
        text = path.read_text()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef) and any(
                    (isinstance(b, ast.Name) and b.id == "Kernel") or
                    (isinstance(b, ast.Attribute) and b.attr == "Kernel") for b in node.bases):
                out.append((path.relative_to(SRC).as_posix(), node.name,
                            ast.get_source_segment(text, node)))
    return out


KERNELS = _kernel_classes()


def test_every_chain_has_its_kernel():
    """The kernels the driver runs (pretraining single and batched, refinement and the
    supervised chain, stochastic MCEM and averaging, the test-time chains, Algorithm 2
    and the SVM's Gibbs loop): a kernel lost in a refactor fails here."""
    found = {f"{m}:{c}" for m, c, _ in KERNELS}
    assert {"pretrain/chain.py:_PretrainKernel", "pretrain/batched_chain.py:_BatchedKernel",
            "topdown/refine.py:_RefineKernel", "mcem/stochastic.py:McemKernel",
            "mcem/averaging.py:AveragingKernel", "pretrain/features.py:_FeatureKernel",
            "topdown/chain.py:_TopdownKernel", "mcem/test_time.py:SweepKernel",
            "mcem/test_time.py:_MapKernel", "supervised/svm_classifier.py:_GibbsFit"} <= found


@pytest.mark.parametrize("module, name, source", KERNELS, ids=[f"{m}:{c}" for m, c, _ in KERNELS])
def test_no_kernel_mentions_burn_in_or_thinning(module, name, source):
    """The schedule is the driver's (mcmc.driver.Schedule): a kernel reads its place in
    it from the step's ``at`` and never counts burn-in or thinning itself."""
    hits = [line.strip() for line in source.splitlines() if SCHEDULE_WORDS.search(line)]
    assert hits == [], f"{module}:{name} decides its own schedule: {hits}"


def test_the_schedule_words_are_caught():
    assert SCHEDULE_WORDS.search("if t >= self.burn_in:")
    assert SCHEDULE_WORDS.search("(t + 1 - b) % self.thin == 0")
    assert SCHEDULE_WORDS.search("the phase before thinning")
    assert not SCHEDULE_WORDS.search("within the tolerance, nothing is thinner than")


def test_exactly_one_module_reads_or_writes_checkpoints():
    """A module that runs a chain (it defines a kernel or calls the driver) leaves every
    file of the chain's state to mcmc.checkpoint."""
    offenders = {}
    for path in sorted(SRC.rglob("*.py")):
        if path == CHECKPOINT_MODULE:
            continue
        text = path.read_text()
        runs_a_chain = "(Kernel)" in text or "run_chain(" in text or "run_in_memory(" in text
        if runs_a_chain and (calls := FILE_IO.findall(text)):
            offenders[path.relative_to(SRC).as_posix()] = sorted(set(calls))
    assert offenders == {}
    assert FILE_IO.search(CHECKPOINT_MODULE.read_text())


def _resolve(dotted):
    module, name = dotted.rsplit(".", 1)
    return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize("dotted", ENTRY_POINTS)
def test_no_entry_point_takes_more_than_8_parameters(dotted):
    params = [p for p in inspect.signature(_resolve(dotted)).parameters if p != "self"]
    assert len(params) <= MAX_PARAMETERS, f"{dotted} takes {len(params)}: {params}"
