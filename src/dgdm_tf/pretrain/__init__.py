"""Layer-wise pretraining (the paper's Sec. 3 Gibbs sampler, one layer at a time) and the layer-wise features."""
