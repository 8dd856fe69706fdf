"""The model's prior hyperparameters (config key ``hyper``), shared by every layer and
every sampler."""

from __future__ import annotations

import dataclasses

#: how the top layer's slab precision gamma_s is shared (:class:`Hyper`.gamma_s)
GAMMA_S_KINDS = ("image_map", "global")


@dataclasses.dataclass(frozen=True)
class Hyper:
    """Prior hyperparameters (the same for every data set, Sec. 4).

    ``gamma_s``: "image_map", one slab precision gamma_s^(n,k) ~ Gamma(a_w, b_w) per image
    and top map, as the supplement's Algorithms 1 and 2 draw it (Eq. SampleR); or
    "global", one gamma_s shared by every image and map (a fixed-D chain then holds it).
    """

    a_e: float = 1e-6
    b_e: float = 1e-6
    a_w: float = 1e-6
    b_w: float = 1e-6
    dict_prior_precision: float = 1.0
    gamma_s: str = "image_map"

    def __post_init__(self):
        if self.gamma_s not in GAMMA_S_KINDS:
            raise ValueError(f"hyper.gamma_s must be one of {list(GAMMA_S_KINDS)}, got {self.gamma_s!r}")

    @property
    def slab_per_image(self) -> bool:
        """gamma_s is a local variable of each image (one per top map), drawn in every sweep."""
        return self.gamma_s == "image_map"

    @classmethod
    def from_dict(cls, d: dict | None) -> "Hyper":
        d = dict(d or {})
        unknown = set(d) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ValueError(f"unknown hyperparameter(s) {sorted(unknown)}; allowed: "
                             f"{[f.name for f in dataclasses.fields(cls)]}")
        return cls(**{k: (str(v) if k == "gamma_s" else float(v)) for k, v in d.items()})
