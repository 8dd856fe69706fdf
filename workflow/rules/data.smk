# Data: fetch the raw files of a dataset, then prepare them into one .npz.


rule download:
    """Fetch (or, for data that cannot be downloaded, check) the raw files of {ds}.
    Raises the data module's DatasetMissingError, saying what to put where."""
    output:
        "results/{ds}/data/fetch.json",
    params:
        spec=lambda wc: data_spec(wc.ds),
        raw_dir=lambda wc: raw_dir(wc.ds),
    log:
        "results/logs/download/{ds}.log",
    benchmark:
        "results/benchmarks/rules/download/{ds}.tsv"
    threads: 1
    resources:
        **res("download"),
    script:
        "../scripts/download.py"


rule prepare:
    """Preprocess {ds} (Sec. 4) into results/{ds}/data/prepared.npz + summary.json."""
    input:
        "results/{ds}/data/fetch.json",
    output:
        npz="results/{ds}/data/prepared.npz",
        summary=report(
            "results/{ds}/data/summary.json",
            caption="../report/data_summary.rst",
            category=CATEGORY["data"],
            subcategory="{ds}",
        ),
    params:
        spec=lambda wc: data_spec(wc.ds),
        raw_dir=lambda wc: raw_dir(wc.ds),
        seed=config["seed"],
    log:
        "results/logs/prepare/{ds}.log",
    benchmark:
        "results/benchmarks/rules/prepare/{ds}.tsv"
    threads: 1
    resources:
        **res("prepare"),
    script:
        "../scripts/prepare.py"
