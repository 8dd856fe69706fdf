"""dgdm_tf: A Deep Generative Deconvolutional Image Model (Pu et al., AISTATS 2016).

All math lives in this package; the Snakemake workflow only wires it.
Axis conventions are defined once in :mod:`dgdm_tf.core.layout`.
"""

__version__ = "0.1.0"
