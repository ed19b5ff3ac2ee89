"""Segments, the pool, query selection and replayed pairs; the reward model is an argument, never imported."""
