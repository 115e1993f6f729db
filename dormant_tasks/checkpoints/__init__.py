"""Checkpoints: revision names and series order, the Hugging Face Hub, file hashes, loading a model at a revision."""
