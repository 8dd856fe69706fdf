"""rule benchmark_projection: the wall time of another config's rows (config/paper.yaml
by default), projected from kernels measured here at each dataset's shapes
(dgdm_tf.bench.projection)."""

from _common import machine_rows_csv, plain, progress, start

start(snakemake, tensorflow=True)

import pandas as pd  # noqa: E402
import yaml  # noqa: E402
from snakemake.utils import validate  # noqa: E402

from dgdm_tf.bench import cluster, projection  # noqa: E402
from dgdm_tf.core.model import DeepModel  # noqa: E402

pcfg = plain(snakemake.params.projection)
ccfg = pcfg["cluster"]
if ccfg["allreduce_floats"]:
    progress(f"all-reduce of {ccfg['allreduce_floats']} floats between {ccfg['allreduce_workers']} "
             "local workers (MultiWorkerMirroredStrategy)")
    loopback = cluster.measure_allreduce(list(ccfg["allreduce_floats"]), workers=int(ccfg["allreduce_workers"]))
    progress(f"  loopback: latency {1e3 * loopback['latency_s']:.2f} ms, "
             f"{loopback['bytes_per_s'] / 1e6:.0f} MB/s ({loopback['sizes']})")
else:
    loopback = {"latency_s": 0.0, "bytes_per_s": float("inf"), "sizes": [], "workers": 0}
latency, bytes_per_s = cluster.combined_link(loopback, network_latency_s=float(ccfg["network_latency_s"]),
                                             network_gbit_s=float(ccfg["network_gbit_s"]))
refine_rows = pd.read_csv(snakemake.input.refine).to_dict("records")
done = plain(snakemake.params.refine_measured)


def measured_topdown(shape, ds, hyper, batch_size):
    """benchmark_refine's rows of the top-down kernels where it measured this dataset's
    model (shape, layers, hyper-parameters, leapfrog and power iterations) at this batch
    size; None (measure them here) otherwise."""
    same = (ds["model"]["layers"] == done["layers"] and hyper == done["hyper"]
            and int(ds["refine"]["n_leapfrog"]) == int(done["n_leapfrog"])
            and int(ds["refine"]["power_iterations"]) == int(done["power_iterations"]))
    rows = [r for r in refine_rows if same and int(r["batch_size"]) == batch_size
            and r["input_shape"] == "x".join(map(str, shape)) and r["step"] in projection.TOPDOWN_KERNELS]
    return rows if len(rows) == len(projection.TOPDOWN_KERNELS) else None


cluster_rows = []
with open(snakemake.input.config) as f:
    projected = yaml.safe_load(f)
validate(projected, snakemake.params.schema)  # fills the schema's defaults, as a run of it would
datasets = projected["datasets"]
rows = []
for spec in pcfg["datasets"]:
    name = spec["name"]
    if name not in datasets:
        raise ValueError(f"benchmark.projection.datasets names {name!r}, which {snakemake.input.config} "
                         f"does not have (it has {sorted(datasets)}): fix the name or the config")
    ds = datasets[name]
    shape = spec.get("image_shape") or ds.get("image_shape")
    if not shape:
        raise ValueError(f"{snakemake.input.config} leaves datasets.{name}.image_shape to the data: "
                         f"give benchmark.projection.datasets' {name} entry image_shape: [H, W, C]")
    hyper = projected.get("hyper")
    topdown_rows = measured_topdown(tuple(int(v) for v in shape), ds, hyper, int(spec["batch_size"]))
    kernels, cpu_macs_per_s = projection.measure_kernels(
        tuple(int(v) for v in shape), ds["model"]["layers"], batch_size=int(spec["batch_size"]),
        pretrain_batch_size=int(pcfg["pretrain_batch_size"]), svm_images=list(pcfg["svm_images"]),
        n_classes=int(spec["n_classes"]), sweeps=int(snakemake.params.sweeps),
        seed=int(snakemake.params.seed), hyper=hyper, n_leapfrog=int(ds["refine"]["n_leapfrog"]),
        power_iterations=int(ds["refine"]["power_iterations"]), topdown_rows=topdown_rows,
        progress=progress)
    for k, v in kernels.items():
        progress(f"  {name}: {k}: {v}")
    stages, left_out = projection.plan(ds, int(spec["n_train"]), int(spec["n_test"]))
    speedup = float(pcfg["gpu_macs_per_s"]) / cpu_macs_per_s
    for r in projection.project(stages, kernels, gpu_speedup=speedup,
                                step_latency_s=float(pcfg["gpu_step_latency_s"])):
        k = kernels[r["kernel"]]
        rows.append({"config": str(snakemake.input.config), "dataset": name, **r, "q": k["q"],
                     "measured_at": k["measured_at"], "cpu_macs_per_s": cpu_macs_per_s, "gpu_speedup": speedup,
                     "left_out": "; ".join(left_out)})
    ds_rows = [r for r in rows if r["dataset"] == name]
    model = DeepModel(tuple(int(v) for v in shape), ds["model"]["layers"], hyper)
    reds = {k: cluster.reductions(model, k, n_leapfrog=int(ds["refine"]["n_leapfrog"]),
                                  power_iterations=int(ds["refine"]["power_iterations"]),
                                  n_classes=int(spec["n_classes"]))
            for k in {r["kernel"] for r in ds_rows}}
    for r in cluster.project_nodes(ds_rows, kernels, reds, nodes=[int(n) for n in ccfg["nodes"]],
                                   cores_per_node=int(ccfg["cores_per_node"]),
                                   cores_measured=int(snakemake.threads), latency_s=latency,
                                   bytes_per_s=bytes_per_s):
        cluster_rows.append({"config": str(snakemake.input.config), **r,
                             "cores_per_node": int(ccfg["cores_per_node"]),
                             "cores_measured": int(snakemake.threads),
                             "link_latency_s": latency, "link_bytes_per_s": bytes_per_s,
                             "loopback_latency_s": loopback["latency_s"],
                             "loopback_bytes_per_s": loopback["bytes_per_s"]})
    for n in ccfg["nodes"]:
        h = sum(r["hours"] for r in cluster_rows if r["dataset"] == name and r["nodes"] == int(n))
        progress(f"{name}: {h:.1f} h on {n} node(s) of {ccfg['cores_per_node']} cores")
    progress(f"{name}: {sum(r['cpu_hours'] for r in rows if r['dataset'] == name):.0f} h on this "
             f"machine, {sum(r['gpu_hours'] for r in rows if r['dataset'] == name):.0f} h on the assumed GPU")
machine_rows_csv(rows, snakemake.output.projection)
machine_rows_csv(cluster_rows, snakemake.output.cluster)
progress("done")
