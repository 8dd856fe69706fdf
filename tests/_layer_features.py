"""One layer's features with its dictionary fixed (dgdm_tf.pretrain.features.infer_layer)
as the sampler tests call it: gamma_w 1, graph mode, the settings given as keywords."""

from dgdm_tf.pretrain.features import infer_layer
from dgdm_tf.pretrain.options import FeatureOptions, Pretrained
from dgdm_tf.pretrain.ridge_start import RidgeStart


def layer_features(x, d, p, seed, *, gamma_e_init=2500.0, stats=None, **options):
    """The pooled posterior mean of layer 1 of the one-layer model ``d`` (pool ``p``) on
    ``x``; ``options`` are :class:`FeatureOptions` fields (default here: jit_compile off,
    pretraining's ridge start of 40 CG steps)."""
    return infer_layer(x, Pretrained([d], [p], [1.0], [gamma_e_init]),
                       FeatureOptions(**{"jit_compile": False, "start": RidgeStart(), **options}),
                       seed=seed, stats=stats, progress=None)
