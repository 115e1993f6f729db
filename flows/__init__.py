"""The top layer: thin Prefect flows (`track`, `evaluate`, `demo`), their deployments, and the `dormant` CLI."""
