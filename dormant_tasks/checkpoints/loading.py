"""Load a model + tokenizer at a revision, in a dtype, on a device. `load_model_and_tokenizer` is the one place that
calls `from_pretrained`, always with `trust_remote_code=False`; fetching, eviction and the commit are the series'
source's (`sources`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import struct
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from dormant_tasks.checkpoints.hub import (  # noqa: F401 (re-exported)
    _content_hash,
    file_sha256,
    is_loading_file,
    local_content_hash,
)
from dormant_tasks.checkpoints.naming import Revision
from dormant_tasks.checkpoints.sources import CheckpointSource, source_for
from dormant_tasks.devices import Device, DType, check_device_available, is_cuda, parse_device, parse_dtype
from dormant_tasks.errors import CheckpointError, ConfigError

log = logging.getLogger(__name__)
TORCH_DTYPES = {DType.FLOAT32: torch.float32, DType.BFLOAT16: torch.bfloat16, DType.FLOAT16: torch.float16}


def resolve_device(device: str = "auto") -> str:
    """The torch device of a `--device` value (`devices.parse_device`): auto is cuda when a GPU is visible."""
    device = parse_device(device)
    if device == Device.AUTO:
        return "cuda" if torch.cuda.is_available() else "cpu"
    if is_cuda(device):
        check_device_available(device)  # the same ConfigError as the CLI's check before loading
        if not torch.cuda.is_available():
            raise ConfigError(f"--device {device}: torch sees no CUDA GPU (a CPU-only build?); use --device cpu")
    return str(device)


def resolve_dtype(dtype: str) -> torch.dtype | str:
    if dtype == "auto":  # the checkpoint's own dtype (evaluate --precision paper, for non-OLMo-2 ids)
        return "auto"
    return TORCH_DTYPES[parse_dtype(dtype)]


def load_model_and_tokenizer(
    source: str | Path,
    revision: str | None = None,
    dtype: str = "float32",
    device: str = "auto",
    *,
    int8: bool = False,
):
    """(model in eval mode, tokenizer) from a local folder or a Hub repo at `revision`; `int8`: linear weights
    in 8 bits (bitsandbytes LLM.int8, the authors' OLMo-2 loading), placed on `device` as they load."""
    from transformers import AutoTokenizer

    torch_dtype = resolve_dtype(dtype)
    device = resolve_device(device)
    where = f"{source}" + (f"@{revision}" if revision else "")
    config = _local_config(Path(source) / "config.json", where)
    if config is not None:
        _refuse_custom_config(config, where)
        _refuse_impossible_shape(config, where)
    try:
        with _quiet_transformers():
            tokenizer = AutoTokenizer.from_pretrained(str(source), revision=revision, trust_remote_code=False)
    except Exception as e:  # transformers raises OSError/ValueError/... for a folder with no tokenizer
        _refuse_custom_code(where, e)
        raise CheckpointError(
            f"{where}: no tokenizer could be loaded ({type(e).__name__}: {_first_line(e)}); "
            "a checkpoint folder or Hub repo needs its tokenizer files beside the weights"
        ) from None
    try:
        if int8:  # a quantized model cannot be moved after loading: it is placed while it loads
            from transformers import BitsAndBytesConfig

            model = _from_pretrained(
                source,
                where,
                revision=revision,
                dtype=torch_dtype,
                quantization_config=BitsAndBytesConfig(load_in_8bit=True),
                device_map=device,
            )
            return text_model(model, where).eval(), tokenizer
        model = _from_pretrained(source, where, revision=revision, dtype=torch_dtype)
        model = text_model(model, where).to(device)  # type: ignore[arg-type]  # transformers' stub wraps `to`
    except (MemoryError, torch.OutOfMemoryError) as e:
        raise CheckpointError(
            f"out of memory loading {where} on {device} ({type(e).__name__}: {_first_line(e)}); "
            "use --dtype bfloat16, another --device, or a machine with more memory"
        ) from None
    except CheckpointError:
        raise
    except Exception as e:
        _refuse_custom_code(where, e)
        if config is not None:
            _refuse_damaged_weights(Path(source), where)
            _refuse_other_model(Path(source), config, where)
        _refuse_multimodal(config, where, e)
        raise CheckpointError(
            f"{where} is not a loadable causal LM ({type(e).__name__}: {_first_line(e)}); "
            "a checkpoint needs a config.json and the weight files of that one model"
        ) from None
    _refuse_non_finite(model, where)  # on the device: one fast pass over the weights on a GPU
    return model.eval(), tokenizer


def text_model(model, where: str):
    """The causal LM of `model`'s text config, sharing its language model and output head (no copy): a multimodal
    checkpoint (Gemma-3's vision tower beside the language model) is scored as its language model alone, whose forward
    on text is the whole model's. A text-only model is returned as it is."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

    config = model.config
    text = config.get_text_config()
    if text is config:
        return model
    causal: Any = MODEL_FOR_CAUSAL_LM_MAPPING[type(text)] if type(text) in MODEL_FOR_CAUSAL_LM_MAPPING else None
    decoder, head = model.get_decoder(), model.get_output_embeddings()
    if causal is not None and decoder is not None and head is not None:
        with torch.device("meta"):  # built empty, then given the loaded modules
            out = causal(text)
        out.model, out.lm_head = decoder, head
        if not any(t.is_meta for t in (*out.parameters(), *out.buffers())):
            return out
    raise CheckpointError(
        f"{where} is a multimodal checkpoint ({type(model).__name__}) whose language model could not be taken out "
        f"as a causal LM of its text config ({type(text).__name__}); score a text-only checkpoint of the family, or "
        "save the language model alone (with its output head) as a checkpoint folder"
    )


def _refuse_multimodal(config: dict | None, where: str, e: BaseException) -> None:
    """A multimodal checkpoint that AutoModelForCausalLM does not load at all (LLaVA, Qwen2-VL, Mistral-3): one
    line that says so and names the fix, rather than "not a loadable causal LM"."""
    if config is not None and isinstance(config.get("text_config"), dict):
        raise CheckpointError(
            f"{where} is a multimodal checkpoint (model_type {config.get('model_type')!r}) that transformers does "
            f"not load as a causal LM ({type(e).__name__}: {_first_line(e)}); score a text-only checkpoint of its "
            "language model, or save the language model alone as a checkpoint folder"
        ) from None


def _local_config(config_file: Path, where: str) -> dict | None:
    """A local folder's config.json as a dict; None when there is none readable (transformers' own error says
    so) or the source is a Hub id. One that is there but is no JSON object is named as such (transformers, reading
    the tokenizer first, would say that no tokenizer could be loaded)."""
    try:
        raw = config_file.read_bytes()
    except OSError:
        return None
    try:
        config = json.loads(raw.decode("utf-8"))
    except ValueError as e:  # UnicodeDecodeError is one
        raise CheckpointError(
            f"{where}: its config.json is not valid JSON ({_first_line(e)}); fix it or re-download the checkpoint"
        ) from None
    if not isinstance(config, dict):
        raise CheckpointError(
            f"{where}: its config.json is not a JSON object ({type(config).__name__}); fix it or re-download the "
            "checkpoint"
        )
    return config


def _refuse_custom_config(config: dict, where: str) -> None:
    """A local folder's config that only its own code can read: refused before transformers reads it (its
    tokenizer loading would first warn about the unknown model type)."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    if config.get("auto_map") and config.get("model_type") not in CONFIG_MAPPING:
        _refuse_custom_code(where, ValueError("custom code"))


def _refuse_impossible_shape(config: dict, where: str) -> None:
    """A config that cannot be a model (no layers, more key/value heads than heads, heads not a multiple of them, a
    width not divisible by the heads): one line before loading, where torch would die of a floating-point exception
    or the engine find no head to score."""
    config = config["text_config"] if isinstance(config.get("text_config"), dict) else config  # a multimodal one's
    layers = config.get("num_hidden_layers")
    if isinstance(layers, int) and not isinstance(layers, bool) and layers < 1:
        # transformers builds a model of no layers, which has no heads to score
        raise CheckpointError(
            f"{where}: its config.json cannot be a model: num_hidden_layers {layers} (a model has at least one "
            "layer, and a head is scored in one); fix the config or drop this checkpoint"
        )
    values = [config.get("num_attention_heads"), config.get("num_key_value_heads"), config.get("hidden_size")]
    values[1] = values[1] or values[0]
    ints = [x for x in values if isinstance(x, int) and not isinstance(x, bool)]
    if len(ints) < 3:
        return
    heads, kv, width = ints
    why = (
        f"num_attention_heads {heads} is not a positive multiple of num_key_value_heads {kv}"
        if heads < 1 or kv < 1 or heads % kv
        else f"hidden_size {width} is not divisible by num_attention_heads {heads} (and no head_dim is given)"
        if config.get("head_dim") is None and width % heads
        else ""
    )
    if why:
        raise CheckpointError(
            f"{where}: its config.json cannot be a model: {why}; fix the config or drop this checkpoint"
        )


def _refuse_non_finite(model, where: str) -> None:
    """NaN or Inf in a weight: refused, naming the tensor (its scores would be NaN, and a NaN head is never inactive,
    so it would be counted active)."""
    for name, weight in model.named_parameters():
        if weight.is_floating_point() and not bool(torch.isfinite(weight).all()):
            raise CheckpointError(
                f"{where}: weight {name} holds NaN or Inf values; the checkpoint is damaged or diverged: "
                "re-download or re-save it, or drop it from the selection"
            )


@contextlib.contextmanager
def _quiet_transformers():
    """transformers' own warnings off stderr while it loads (its coloured load report table among them): what they
    say that matters is either refused in one line here or noted through `_note_missing`. Set through its
    documented verbosity switch, and put back afterwards."""
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)


def _from_pretrained(source: str | Path, where: str, **kwargs: Any) -> Any:
    """AutoModelForCausalLM.from_pretrained, never running the checkpoint's code, its warnings kept off stderr and
    weights it had to initialise at random said in one line."""
    from transformers import AutoModelForCausalLM

    with _quiet_transformers():
        loaded: Any = AutoModelForCausalLM.from_pretrained(
            str(source), trust_remote_code=False, output_loading_info=True, **kwargs
        )
    model, info = loaded
    _note_missing(info, where)
    return model


def _note_missing(info: dict, where: str) -> None:
    """Weights the model has and its files lack were initialised at random: one line (transformers' table is
    kept off stderr), since the heads they feed score noise."""
    missing = list(info.get("missing_keys") or [])
    if missing:
        log.warning(
            "%s: %s missing from its files initialised at random (%s%s); its scores are not the checkpoint's: "
            "re-download it or drop it",
            where,
            f"{len(missing)} weight was" if len(missing) == 1 else f"{len(missing)} weights were",
            ", ".join(sorted(missing)[:3]),
            ", ..." if len(missing) > 3 else "",
        )


# Bytes per element of each safetensors dtype (the format's own names).
_DTYPE_BYTES = {"F64": 8, "I64": 8, "U64": 8, "F32": 4, "I32": 4, "U32": 4, "F16": 2, "BF16": 2, "I16": 2, "U16": 2}
_DTYPE_BYTES |= {"I8": 1, "U8": 1, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1}


def _safetensors_header(file: Path, where: str) -> dict:
    """`file`'s header (the format: 8 bytes of little-endian header length, a JSON header, then the data), refusing
    in one line a file cut short (shorter than its header, or than the data its header places) or a header whose
    shape and data span disagree. Only the header is read."""
    cut = f"the file is cut short (a download or copy that did not finish): re-download or re-copy {file.name}"
    size = file.stat().st_size
    with file.open("rb") as f:
        head = f.read(8)
        length = struct.unpack("<Q", head)[0] if len(head) == 8 else None
        if length is None or 8 + length > size:
            raise CheckpointError(f"{where}: {file.name} ({size} bytes) ends inside its own header; {cut}")
        try:
            header = json.loads(f.read(length))
            spans = {k: v for k, v in header.items() if k != "__metadata__"}
            end = max((v["data_offsets"][1] for v in spans.values()), default=0)
        except (ValueError, TypeError, KeyError, IndexError):
            raise CheckpointError(
                f"{where}: {file.name}'s header is not a safetensors header (the file is damaged, not cut short); "
                "re-download or re-save it"
            ) from None
    if 8 + length + end > size:
        raise CheckpointError(
            f"{where}: {file.name}'s header places {end} bytes of tensor data but the file holds "
            f"{size - 8 - length}; {cut}"
        )
    for key, v in spans.items():
        start, stop = v["data_offsets"]
        width = _DTYPE_BYTES.get(v.get("dtype"))
        if width is not None and math.prod(v["shape"]) * width != stop - start:
            raise CheckpointError(
                f"{where}: {file.name}'s header gives {key} the shape {v['shape']} ({v['dtype']}) but "
                f"{stop - start} bytes of data, which do not hold it: the header is wrong (the file was altered, not "
                "cut short); re-download or re-save the checkpoint"
            )
    return spans


def _refuse_damaged_weights(folder: Path, where: str) -> None:
    """After a failed load: a safetensors file of the folder that is cut short or whose header is inconsistent,
    named (the truncated-copy advice only where a file really is short)."""
    for file in sorted(folder.glob("*.safetensors")) if folder.is_dir() else []:
        _safetensors_header(file, where)


def _refuse_other_model(folder: Path, config: dict, where: str) -> None:
    """After a failed load: a tensor whose shape in the folder's safetensors files is not the one config.json
    makes (a config of another model, or a header that lies about a shape), named from both files. The config's
    shapes come from the model built on the meta device (no memory); keys the model names otherwise are skipped."""
    from transformers import AutoConfig, AutoModelForCausalLM

    try:
        with _quiet_transformers():
            model_config = AutoConfig.from_pretrained(str(folder), trust_remote_code=False)
            with torch.device("meta"):
                model = AutoModelForCausalLM.from_config(model_config, trust_remote_code=False)
        expected = {k: list(t.shape) for k, t in model.state_dict().items()}
    except Exception:  # a config transformers cannot build: its own error, in the generic line, says so
        return
    text = config["text_config"] if isinstance(config.get("text_config"), dict) else config
    vocab = text.get("vocab_size")
    for file in sorted(folder.glob("*.safetensors")):
        for key, v in _safetensors_header(file, where).items():
            want, held = expected.get(key), list(v["shape"])
            if want is None or want == held:
                continue
            says = (
                f"config.json says vocab_size {vocab}"
                if vocab in want[:1] and held[:1] != [vocab]
                else f"config.json makes {key} {want}"
            )
            raise CheckpointError(
                f"{where}: {says} but {file.name} holds {key} {held}: the config and the weights are of different "
                "models (or the file's header was altered); fix config.json or re-download the checkpoint"
            )


def _refuse_custom_code(where: str, e: BaseException) -> None:
    """A checkpoint whose config names its own Python code (`auto_map`) for a model type transformers does not
    know: one line. `trust_remote_code=False` is passed explicitly everywhere, because left unset transformers
    asks `[y/N]` on stdin and a `y` there (a pipe) would run the checkpoint's code."""
    if "trust_remote_code" in str(e) or "custom code" in str(e):
        raise CheckpointError(
            f"{where} needs its own Python code to load (its config.json's auto_map names a model type "
            "transformers does not know); dormant-heads never runs a checkpoint's code: use a checkpoint of a "
            "model type transformers ships"
        ) from None


def _first_line(e: BaseException) -> str:
    return (str(e).splitlines() or [""])[0]


# ---- Checkpoints of a series: fetched, evicted and given their commit by the series' source ----


@dataclass
class LoadedCheckpoint:
    """A model + tokenizer in memory. `commit` is the Hub commit sha, or for a local folder the sha256
    content hash of its files (`local_content_hash`)."""

    model: Any
    tokenizer: Any
    revision: Revision
    commit: str
    local_path: Path
    seconds_download: float
    seconds_load: float


def fetch_revision(
    source: str | Path | CheckpointSource,
    revision: Revision,
    cache_dir: str | Path | None = None,
    retries: int = 3,
    backoff_s: float = 2.0,
) -> Path:
    """The folder holding `revision`'s files (`CheckpointSource.fetch`): a local checkpoint folder as is, or a Hub
    revision downloaded pinned to its commit by `hub.download_revision` (disk- and hash-checked, evicted on
    failure)."""
    return source_for(source).fetch(revision, cache_dir, retries, backoff_s)


def load_checkpoint(
    source: str | Path | CheckpointSource,
    revision: Revision,
    dtype: str = "float32",
    device: str = "auto",
    cache_dir: str | Path | None = None,
    keep: bool = True,
    int8: bool = False,
) -> LoadedCheckpoint:
    """Fetch `revision` of `source` and load it. With `keep=False` a fetched copy is evicted by its source (a Hub
    revision: `hub.evict_revision`) as soon as loading is over, whether it succeeded or not, so a sweep's disk
    holds no more than the revisions in flight; local folders are never touched."""
    origin = source_for(source)
    t0 = time.perf_counter()
    path = origin.fetch(revision, cache_dir)
    t1 = time.perf_counter()
    try:
        model, tokenizer = load_model_and_tokenizer(path, None, dtype, device, int8=int8)
    finally:
        if not keep:
            origin.evict(revision, path, cache_dir)
    t2 = time.perf_counter()
    return LoadedCheckpoint(model, tokenizer, revision, origin.commit(revision, path), path, t1 - t0, t2 - t1)


def load_model_at(
    source: str | Path | CheckpointSource,
    revision: str | None = None,
    dtype: str = "float32",
    device: str = "auto",
    cache_dir: str | Path | None = None,
    *,
    int8: bool = False,
):
    """(model, tokenizer) of one checkpoint (`CheckpointSource.checkpoint`): a local folder in place, or a Hub
    branch/tag (default `main`) downloaded pinned to its commit, disk-checked and hash-checked."""
    origin = source_for(source)
    path = origin.fetch(origin.checkpoint(revision), cache_dir)
    return load_model_and_tokenizer(path, None, dtype, device, int8=int8)
