"""Each training image's local variables kept between its visits in stochastic MCEM
(``mcem.local_state: persist``).

Algorithm 1 of the supplement starts every E-step from scratch (here the matched-filter
state of :func:`dgdm_tf.topdown.state.init_state`). With ``persist`` an image's E-step
instead starts from the state its previous visit's last sample left (every per-image field
of :data:`dgdm_tf.topdown.state.PER_IMAGE_FIELDS` but the residual: the unpooling Z,
theta, S[L], the top indicators, pi, gamma_s and gamma_e), its residual recomputed under
the current D. This
is the persistent form of the E-step: the images' locals form one Markov chain across the
epochs, as the Gibbs chain's locals do from sweep to sweep, while D moves by the M-step.
An image not yet visited starts from the matched filter, so the first epoch is the
restarted algorithm's bit for bit.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from dgdm_tf.topdown.state import PER_IMAGE_FIELDS, DeepState, residual
from dgdm_tf.core.model import DeepModel

#: what a visit leaves for the next: every per-image field but the residual, which depends
#: on D and is recomputed at the next visit
KEPT_FIELDS = tuple(f for f in PER_IMAGE_FIELDS if f != "resid")


def _leaves(state: DeepState) -> dict[str, np.ndarray]:
    """The kept fields as named arrays (a tuple field as ``<name>_<i>``)."""
    out = {}
    for f in KEPT_FIELDS:
        v = getattr(state, f)
        if isinstance(v, tuple):
            out.update({f"{f}_{i}": np.asarray(t) for i, t in enumerate(v)})
        else:
            out[f] = np.asarray(v)
    return out


class LocalStore:
    """The per-image locals of ``n`` images: ``merge`` a batch's fresh start with what its
    images' last visits left, ``keep`` a batch's last sample; ``arrays`` / ``load`` for the
    checkpoint (the names prefixed ``local_``, ``local_seen`` the visited images)."""

    PREFIX = "local_"

    def __init__(self, n: int):
        self.n = int(n)
        self.seen = np.zeros(self.n, bool)
        self.fields: dict[str, np.ndarray] | None = None

    def merge(self, fresh: DeepState, idx, x, model: DeepModel) -> DeepState:
        """``fresh`` (the batch's matched-filter start, images ``idx``) with the images
        already visited taking their kept locals; the residual X - g(S) under ``fresh``'s D."""
        idx = np.asarray(idx, np.int64)
        old = self.seen[idx]
        if not old.any():
            return fresh
        out = {}
        for f in KEPT_FIELDS:
            v = getattr(fresh, f)
            if isinstance(v, tuple):
                out[f] = tuple(self._pick(t, f"{f}_{i}", idx, old) for i, t in enumerate(v))
            else:
                out[f] = self._pick(v, f, idx, old)
        st = fresh._replace(**out)
        return st._replace(resid=residual(st, tf.convert_to_tensor(x, tf.float32), model))

    def _pick(self, fresh_value, name: str, idx, old) -> tf.Tensor:
        kept = self.fields[name][idx]
        mask = old.reshape((-1,) + (1,) * (kept.ndim - 1))
        return tf.constant(np.where(mask, kept, np.asarray(fresh_value)))

    def keep(self, state: DeepState, idx) -> None:
        """Store the batch's (images ``idx``) per-image fields of ``state``."""
        idx = np.asarray(idx, np.int64)
        leaves = _leaves(state)
        if self.fields is None:
            self.fields = {k: np.zeros((self.n,) + v.shape[1:], v.dtype) for k, v in leaves.items()}
        for k, v in leaves.items():
            self.fields[k][idx] = v
        self.seen[idx] = True

    def arrays(self) -> dict[str, np.ndarray]:
        out = {self.PREFIX + "seen": self.seen.copy()}
        if self.fields is not None:
            out.update({self.PREFIX + k: v for k, v in self.fields.items()})
        return out

    @classmethod
    def load(cls, arrays, n: int) -> "LocalStore":
        """The store saved by :meth:`arrays` (a checkpoint's arrays); ValueError when it
        is absent or holds another number of images."""
        key = cls.PREFIX + "seen"
        if key not in arrays or arrays[key].shape != (int(n),):
            raise ValueError(f"the checkpoint holds no local state of {n} images")
        store = cls(n)
        store.seen = np.asarray(arrays[key], bool).copy()
        fields = {k[len(cls.PREFIX):]: np.asarray(arrays[k]) for k in arrays
                  if k.startswith(cls.PREFIX) and k != key}
        store.fields = fields or None
        return store
