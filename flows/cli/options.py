"""Options that several `dormant` commands share, defined once (stdlib only: `--help` stays light).

The choices mirror `dormant_tasks.requests`' `DType` and `Device`, which validate them again; importing
those here would load the Hub client into every `--help`.
"""

from __future__ import annotations

import argparse

from dormant_tasks.paths import default_store

DTYPES = ["float32", "bfloat16", "float16"]
DEVICES = ["auto", "cpu", "cuda", "mps"]


def add_store_argument(parser) -> None:
    """The one `--store` option of every command that reads or writes a store."""
    parser.add_argument(
        "--store",
        default=str(default_store()),
        metavar="DIR",
        help="Parquet store folder (default: $DORMANT_STORE or ./data/store)",
    )


def add_dtype_argument(parser) -> None:
    parser.add_argument("--dtype", default="float32", choices=DTYPES, help="model dtype (default: %(default)s)")


def add_device_argument(parser, what: str) -> None:
    parser.add_argument(
        "--device",
        default="auto",
        choices=DEVICES,
        help=f"where to {what} (default: %(default)s = cuda when available)",
    )


def add_calibration_arguments(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """The calibration set and its batching, as `track` and `score` read them."""
    parser.add_argument(
        "--texts",
        metavar="FILE",
        help="calibration texts, UTF-8, one per line (default: WinoGrande dev sentences, blank filled)",
    )
    parser.add_argument(
        "--limit",
        type=int,
        metavar="N",
        help="first N calibration texts (default: 128 WinoGrande sentences, all of --texts)",
    )
    parser.add_argument(
        "--batch-size", type=int, default=8, metavar="N", help="inputs per forward pass (default: %(default)s)"
    )
