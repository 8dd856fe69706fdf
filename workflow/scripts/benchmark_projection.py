"""rule benchmark_projection: the wall time of another config's rows (config/paper.yaml
by default), projected from kernels measured here at each dataset's shapes
(dgdm_tf.bench.projection)."""

from _common import machine_rows_csv, plain, progress, start

start(snakemake, tensorflow=True)

import yaml  # noqa: E402
from snakemake.utils import validate  # noqa: E402

from dgdm_tf.bench import projection  # noqa: E402

pcfg = plain(snakemake.params.projection)
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
    kernels, cpu_macs_per_s = projection.measure_kernels(
        tuple(int(v) for v in shape), ds["model"]["layers"], batch_size=int(spec["batch_size"]),
        pretrain_batch_size=int(pcfg["pretrain_batch_size"]), svm_images=list(pcfg["svm_images"]),
        n_classes=int(spec["n_classes"]), sweeps=int(snakemake.params.sweeps),
        seed=int(snakemake.params.seed), hyper=hyper, n_leapfrog=int(ds["refine"]["n_leapfrog"]),
        power_iterations=int(ds["refine"]["power_iterations"]), progress=progress)
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
    progress(f"{name}: {sum(r['cpu_hours'] for r in rows if r['dataset'] == name):.0f} h on this "
             f"machine, {sum(r['gpu_hours'] for r in rows if r['dataset'] == name):.0f} h on the assumed GPU")
machine_rows_csv(rows, snakemake.output[0])
progress("done")
