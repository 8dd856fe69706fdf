"""Peers and references: the CNN and the soft-threshold encoder."""
