"""The bundled evaluation datasets: each loads offline as lm-eval's task YAML would read it from the Hub.

Row counts are the full Hub splits; the features are the Hub's (lm-eval's doc_to_target reads MMLU's `answer`
and PIQA's `label` as class indices, HellaSwag's `label` and WinoGrande's `answer` as strings); the
WinoGrande rows are the package's calibration file's, row for row.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import datasets
import pytest

from dormant_tasks.evaluation.bundled import TASKS_DIR, bundled_dataset, bundled_datasets
from dormant_tasks.tracking.calibration import load_winogrande_items

MMLU_SUBJECTS = 57
ROWS = {  # (path, name, split) -> rows; MMLU is checked per split over its 57 subjects
    ("allenai/winogrande", "winogrande_xl", "validation"): 1267,
    ("Rowan/hellaswag", None, "validation"): 10042,
    ("baber/piqa", None, "validation"): 1838,
    ("openai/gsm8k", "main", "test"): 1319,
}
MMLU_ROWS = {"test": 14042, "validation": 1531, "dev": 285}


def _features() -> dict[str, datasets.Features]:
    from datasets import ClassLabel, Features, List, Value

    text = Value("string")
    return {
        "allenai/winogrande": Features({"sentence": text, "option1": text, "option2": text, "answer": text}),
        "cais/mmlu": Features(
            {"question": text, "subject": text, "choices": List(text), "answer": ClassLabel(names=list("ABCD"))}
        ),
        "Rowan/hellaswag": Features(
            {
                "ind": Value("int32"),
                "activity_label": text,
                "ctx_a": text,
                "ctx_b": text,
                "ctx": text,
                "endings": List(text),
                "source_id": text,
                "split": text,
                "split_type": text,
                "label": text,
            }
        ),
        "baber/piqa": Features({"goal": text, "sol1": text, "sol2": text, "label": ClassLabel(names=["0", "1"])}),
        "openai/gsm8k": Features({"question": text, "answer": text}),
    }


@pytest.fixture(scope="module")
def loaded(tmp_path_factory) -> dict[tuple[str, str | None], datasets.DatasetDict]:
    """Every bundled dataset, loaded the way eval_tasks points lm-eval at it, with the Hub off."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_DATASETS_OFFLINE", "1")
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setattr(datasets.config, "HF_HUB_OFFLINE", True)  # read from the environment when datasets is imported
        mp.setattr(datasets.config, "HF_DATASETS_OFFLINE", True)
        cache = tmp_path_factory.mktemp("hf-datasets-cache")
        datasets.disable_progress_bars()
        return {
            (d.path, d.name): datasets.load_dataset(
                "parquet", data_files={split: str(file) for split, file in d.splits.items()}, cache_dir=str(cache)
            )
            for d in bundled_datasets()
        }


def test_the_folder_layout_gives_lm_evals_dataset_path_name_and_split():
    assert {d.path for d in bundled_datasets()} == set(_features())
    mmlu = bundled_dataset("cais/mmlu", "anatomy")
    assert mmlu is not None and mmlu.full
    assert mmlu.splits == {s: TASKS_DIR / "cais--mmlu" / "anatomy" / f"{s}.parquet" for s in MMLU_ROWS}
    hellaswag = bundled_dataset("Rowan/hellaswag", None)
    assert hellaswag is not None and hellaswag.splits == {
        "validation": TASKS_DIR / "Rowan--hellaswag" / "validation.parquet"
    }
    assert bundled_dataset("Rowan/hellaswag", "default") is None
    assert bundled_dataset("allenai/winogrande", None) is None  # lm-eval asks for winogrande_xl
    assert bundled_dataset("allenai/ai2_arc", "ARC-Easy") is None
    listed = {f for d in bundled_datasets() for f in d.splits.values()}
    assert listed == set(TASKS_DIR.rglob("*.parquet")) and all(f.is_file() for f in listed)
    assert all(d.full for d in bundled_datasets())


def _yaml_fields(text: str) -> dict[str, str]:
    return {k: v.strip().strip('"') for k, v in re.findall(r'^"?(\w+)"?:[ \t]*(\S[^\n]*)$', text, flags=re.M)}


def test_every_split_lm_evals_tasks_score_is_bundled():
    """The datasets and scored splits named in lm-eval 0.4.13's own task YAMLs (read as text, not imported)."""
    spec = importlib.util.find_spec("lm_eval")
    assert spec is not None and spec.origin is not None, "lm-eval, a dependency, is not installed"
    tasks = Path(spec.origin).parent / "tasks"
    wanted = []
    for yaml in ("winogrande/default.yaml", "hellaswag/hellaswag.yaml", "piqa/piqa.yaml", "gsm8k/gsm8k.yaml"):
        f = _yaml_fields((tasks / yaml).read_text(encoding="utf-8"))
        name = None if f["dataset_name"] == "null" else f["dataset_name"]
        wanted.append((f["dataset_path"], name, f.get("test_split", "null"), f.get("validation_split")))
    template = _yaml_fields((tasks / "mmlu/default/_default_template_yaml").read_text(encoding="utf-8"))
    subjects = [
        _yaml_fields(p.read_text(encoding="utf-8"))["dataset_name"]
        for p in (tasks / "mmlu/default").glob("mmlu_*.yaml")
    ]
    assert len(subjects) == MMLU_SUBJECTS
    wanted += [(template["dataset_path"], s, template["test_split"], None) for s in subjects]
    for path, name, test_split, validation_split in wanted:
        data = bundled_dataset(path, name)
        assert data is not None, (path, name)
        scored = test_split if test_split != "null" else validation_split
        assert scored in data.splits, (path, name, scored)
    assert {(d.path, d.name) for d in bundled_datasets()} == {(p, n) for p, n, _, _ in wanted}


def test_every_bundled_dataset_loads_offline_with_the_hub_features_and_row_counts(loaded):
    features = _features()
    for (path, name), data in loaded.items():
        for split, rows in data.items():
            assert rows.features == features[path], (path, name, split)
            if path != "cais/mmlu":
                assert rows.num_rows == ROWS[(path, name, split)], (path, name, split)
    mmlu = {name: data for (path, name), data in loaded.items() if path == "cais/mmlu"}
    assert len(mmlu) == MMLU_SUBJECTS
    for split, total in MMLU_ROWS.items():
        assert sum(data[split].num_rows for data in mmlu.values()) == total, split
    assert all(data["dev"].num_rows == 5 for data in mmlu.values())  # lm-eval's 5 few-shot examples, first_n
    assert set(ROWS) == {(p, n, s) for (p, n), data in loaded.items() if p != "cais/mmlu" for s in data}


def test_the_values_are_what_lm_evals_prompts_and_targets_read(loaded):
    for (path, name), data in loaded.items():
        if path == "cais/mmlu":
            test = data["test"]
            assert set(test["subject"]) == {name}
            assert all(len(c) == 4 for c in test["choices"]) and set(test["answer"]) <= {0, 1, 2, 3}
    hellaswag = loaded[("Rowan/hellaswag", None)]["validation"]
    assert set(hellaswag["label"]) == {"0", "1", "2", "3"} and all(len(e) == 4 for e in hellaswag["endings"])
    piqa = loaded[("baber/piqa", None)]["validation"]
    assert set(piqa["label"]) == {0, 1}
    gsm8k = loaded[("openai/gsm8k", "main")]["test"]
    assert all(re.search(r"\n#### -?[\d,.]+$", a) for a in gsm8k["answer"])  # the chain of thought, then the number
    assert gsm8k[0]["question"].startswith("Janet’s ducks lay 16 eggs per day.")
    assert gsm8k[0]["answer"].endswith("#### 18")


def test_bundled_winogrande_is_the_calibration_file_row_for_row(loaded):
    rows = loaded[("allenai/winogrande", "winogrande_xl")]["validation"].to_list()
    items = load_winogrande_items()
    assert len(rows) == len(items) == 1267
    for i, (row, item) in enumerate(zip(rows, items, strict=True)):
        assert row == {k: item[k] for k in ("sentence", "option1", "option2", "answer")}, i


def test_the_module_imports_neither_pyarrow_nor_datasets():
    code = "import sys, dormant_tasks.evaluation.bundled as b; b.bundled_datasets(); print(sorted({'pyarrow', 'datasets'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
