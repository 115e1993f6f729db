"""The score engine: the attention function that computes every score function in one forward pass, zeroing, batching."""
