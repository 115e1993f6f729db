"""The Parquet store: schemas, atomic writes, reads through the manifest, repair and upgrade."""
