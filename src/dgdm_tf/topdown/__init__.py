"""The whole model's Gibbs sampler (refinement and test-time chains)."""
