"""The model's prior hyperparameters (config key ``hyper``), shared by every layer and
every sampler."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Hyper:
    """Prior hyperparameters (the same for every data set, Sec. 4)."""

    a_e: float = 1e-6
    b_e: float = 1e-6
    a_w: float = 1e-6
    b_w: float = 1e-6
    dict_prior_precision: float = 1.0

    @classmethod
    def from_dict(cls, d: dict | None) -> "Hyper":
        d = dict(d or {})
        unknown = set(d) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ValueError(f"unknown hyperparameter(s) {sorted(unknown)}; allowed: "
                             f"{[f.name for f in dataclasses.fields(cls)]}")
        return cls(**{k: float(v) for k, v in d.items()})
