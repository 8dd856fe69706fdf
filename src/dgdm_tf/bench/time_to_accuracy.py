"""How long the CNN needs to match a dgdm run's test error (:func:`time_to_accuracy`)."""

from __future__ import annotations


def time_to_accuracy(dgdm: dict, cnn: dict) -> dict:
    """How long the CNN needs to match a dgdm run.

    ``dgdm``, ``cnn``: the runs' metrics.json (``test_error_pct``, ``wall_seconds``; the
    CNN's per-epoch ``curve`` with ``seconds_cumulative`` and ``test_error_pct``). The
    CNN's time is its training time up to the first epoch whose test error is the dgdm
    run's or better (``cnn_reached``), or up to its best epoch if none is.
    ``ratio``: dgdm wall seconds / that CNN time (above 1: the CNN is faster).
    """
    curve = cnn.get("curve") or []
    if not curve:
        raise ValueError("time_to_accuracy: the CNN metrics have no per-epoch 'curve'")
    target = float(dgdm["test_error_pct"])
    hit = next((c for c in curve if float(c["test_error_pct"]) <= target), None)
    pick = hit or min(curve, key=lambda c: (float(c["test_error_pct"]), c["epoch"]))
    dgdm_s = float(dgdm["wall_seconds"])
    cnn_s = float(pick["seconds_cumulative"])
    return {"dgdm_method": dgdm.get("method", "pretrained_svm"),
            "dgdm_test_error_pct": target, "dgdm_wall_seconds": dgdm_s,
            "cnn_reached": hit is not None, "cnn_epoch": int(pick["epoch"]),
            "cnn_test_error_pct": float(pick["test_error_pct"]), "cnn_seconds": cnn_s,
            "ratio": dgdm_s / cnn_s if cnn_s > 0 else float("inf")}


def time_to_accuracy_rows(metrics, datasets, dgdm_method: str = "pretrained_svm") -> list[dict]:
    """:func:`time_to_accuracy` of every dataset with both runs; ``metrics``:
    (dataset, method) -> metrics.json (:func:`dgdm_tf.report.runs.load_metrics`). A dataset
    with only one of the two runs gets a row with a ``missing`` note instead."""
    rows = []
    for ds in datasets:
        d, c = metrics.get((ds, dgdm_method)), metrics.get((ds, "cnn"))
        if d is None and c is None:
            continue
        if d is None or c is None:
            absent = dgdm_method if d is None else "cnn"
            rows.append({"dataset": ds, "missing": f"no `{absent}` run (needs both "
                         f"`results/{ds}/{dgdm_method}/metrics.json` and "
                         f"`results/{ds}/cnn/metrics.json`)."})
            continue
        rows.append({"dataset": ds, **time_to_accuracy(d, c)})
    return rows
