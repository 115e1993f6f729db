"""Third-party internals (docs/DEVELOPING.md, "Third-party internals"): touched in named adapter modules only, each
checked here against the installed version, so that an upgrade that moves one fails here, naming the adapter.

- The rule: no module of `dormant_tasks/` or `flows/` outside `ADAPTERS` assigns into (or `setattr`s on) a module
  or class it imported, stdlib included, nor reads a third-party module's or class's `_private` names (as an
  attribute or through a string `getattr`/`hasattr`); nor reads, on any object (a model, its config), a
  `_private` attribute that transformers or torch define and neither the project nor the stdlib does
  (`model.config._attn_implementation`): objects are not imported names, so the names are looked up in the
  installed libraries' source.
- huggingface_hub: the offline flags read by its own rule (`dormant_tasks.offline`), its offline switch
  (`checkpoints/hub_adapter`), and the Hub probe through its session (a loopback Hub and a loopback proxy).
- tqdm: `TQDM_DISABLE` is the default of `disable` (`flows/cli/__init__.py` sets it on a pipe).
- transformers: the chat date (`evaluation/chat_date_adapter`): variables reach the template, the clock is fixed
  for one context only.
Prefect's adapter is checked in `tests/flows/test_prefect_adapter.py`; lm-eval's in `tests/library/test_layout.py`
and the evaluation tests.
"""

from __future__ import annotations

import ast
import functools
import http.server
import json
import os
import re
import socket
import subprocess
import sys
import sysconfig
import threading
import time
from datetime import date, datetime
from importlib.util import find_spec
from pathlib import Path

import pytest

from dormant_tasks.offline import datasets_offline, hub_offline, task_data_offline

ROOT = Path(__file__).resolve().parents[2]
ADAPTERS = {
    "flows/prefect_adapter.py": "Prefect's temporary server, log and event workers, console handlers",
    "dormant_tasks/evaluation/lmeval_adapter.py": "lm-eval's task internals",
    "dormant_tasks/evaluation/chat_date_adapter.py": "transformers' chat-template clock",
    "dormant_tasks/evaluation/generation_adapter.py": "transformers' generation config and logits processors",
    "dormant_tasks/engine/attention_impl_adapter.py": "transformers' attention-implementation internals",
    "dormant_tasks/engine/cpu_attention_adapter.py": "torch's private fused CPU attention op",
    "dormant_tasks/checkpoints/hub_adapter.py": "huggingface_hub's offline switch",
}
# The libraries whose private names are refused on any object, not only on what a module imported from them.
WATCHED = ("transformers", "torch")
PROJECT = ("dormant_tasks", "flows")
FIX = (
    "third-party (and stdlib) internals are touched in one adapter module only ({}), scoped, with a drift test "
    "(docs/DEVELOPING.md, 'Third-party internals'): use a public API, or move it into the adapter"
)


# ------------------------------------------------------------------------------------------ the rule


def _foreign(module: str) -> bool:
    return bool(module) and module.split(".")[0] not in PROJECT


def _imported_module(call: ast.expr) -> str | None:
    """ "x.y" for `sys.modules.get("x.y")`, `sys.modules["x.y"]`, `importlib.import_module("x.y")`."""
    text = ast.unparse(call)
    arg = None
    if isinstance(call, ast.Call) and text.startswith(("sys.modules.get(", "importlib.import_module(")) and call.args:
        arg = call.args[0]
    elif isinstance(call, ast.Subscript) and text.startswith("sys.modules["):
        arg = call.slice
    return arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else None


def violations(source: str, where: str) -> list[str]:
    """Each place in `source` that assigns into a foreign module or class, or reads a third-party private name."""
    tree = ast.parse(source)
    bound: dict[str, str] = {}  # a name -> the foreign module (or module.Name) it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if _foreign(a.name):
                    bound[(a.asname or a.name).split(".")[0]] = a.name
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level and _foreign(node.module):
            for a in node.names:
                bound[a.asname or a.name] = f"{node.module}.{a.name}"
        elif isinstance(node, ast.Assign) and (module := _imported_module(node.value)) and _foreign(module):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    bound[target.id] = module

    def root(e: ast.expr) -> str | None:
        while isinstance(e, ast.Attribute | ast.Subscript | ast.Call):
            e = e.func if isinstance(e, ast.Call) else e.value
        return e.id if isinstance(e, ast.Name) and e.id in bound else None

    found = []
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign | ast.Delete):
            targets = list(node.targets)
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        for t in targets:
            if isinstance(t, ast.Attribute) and (name := root(t)):
                found.append(f"{where}:{node.lineno}: assigns {ast.unparse(t)} into {bound[name]}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr"):
            if node.args and (name := root(node.args[0])):
                found.append(f"{where}:{node.lineno}: {node.func.id} on {ast.unparse(node.args[0])} ({bound[name]})")
        read = _private_read(node)
        if read and (name := root(read[0])) and bound[name].split(".")[0] not in sys.stdlib_module_names:
            found.append(f"{where}:{node.lineno}: reads {ast.unparse(node)}, private to {bound[name]}")
    return found


def _private_read(node: ast.AST) -> tuple[ast.expr, str] | None:
    """(object, name) for `obj._name` read, or `getattr(obj, "_name"...)` / `hasattr(obj, "_name")`; dunders aside."""
    if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
        obj, name = node.value, node.attr
    elif (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("getattr", "hasattr")
        and len(node.args) >= 2
        and isinstance(node.args[1], ast.Constant)
        and isinstance(node.args[1].value, str)
    ):
        obj, name = node.args[0], node.args[1].value
    else:
        return None
    return (obj, name) if name.startswith("_") and not name.startswith("__") else None


def private_reads(source: str) -> list[tuple[int, str, str]]:
    """(line, the read as written, the name) of every private attribute read of `source`, on any object."""
    return sorted(
        (node.lineno, ast.unparse(node), read[1])
        for node in ast.walk(ast.parse(source))
        if (read := _private_read(node)) and not (isinstance(read[0], ast.Name) and read[0].id in ("self", "cls"))
    )


def defined_names(source: str) -> set[str]:
    """The names `source` defines: functions, classes, assigned names and attributes, import aliases."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            out.add(node.attr)
        elif isinstance(node, ast.alias):
            out.add(node.asname or node.name.split(".")[-1])
    return out


def _defines(name: str) -> re.Pattern:
    """`def name`, `class name`, `name = ...`, `obj.name = ...`, `name: T = ...` in source text."""
    return re.compile(rf"(?:def|class)\s+{name}\b|(?<![\w.]){name}\s*(?::[^=\n]*)?=(?!=)|\.{name}\s*=(?!=)")


def _sources(root: Path) -> list[str]:
    return [p.read_text(encoding="utf-8", errors="replace") for p in root.rglob("*.py")]


@functools.cache
def _library_sources(package: str) -> tuple[str, ...]:
    root = Path(sysconfig.get_paths()["stdlib"]) if package == "stdlib" else Path(find_spec(package).origin).parent
    return tuple(_sources(root))


def defined_by(names, package: str) -> set[str]:
    """Those of `names` that the installed `package` (or "stdlib") defines somewhere in its Python source."""
    out = set()
    for text in _library_sources(package):
        for name in set(names) - out:
            if name in text and _defines(name).search(text):
                out.add(name)
    return out


def watched_privates(names, project_names=frozenset()) -> dict[str, str]:
    """{name: the library} for each of `names` that transformers or torch define and the project and the stdlib
    do not: a read of it on any object reaches into that library."""
    names = set(names) - set(project_names)
    names -= defined_by(names, "stdlib")
    out: dict[str, str] = {}
    for package in WATCHED:
        out |= {n: package for n in defined_by(names - set(out), package)}
    return out


def object_violations(source: str, where: str, privates: dict[str, str]) -> list[str]:
    """Each read in `source` of a name `privates` maps to its library, on whatever object."""
    return [
        f"{where}:{line}: reads {text}, private to {privates[name]}"
        for line, text, name in private_reads(source)
        if name in privates
    ]


def _project_sources() -> dict[str, str]:
    return {
        path.relative_to(ROOT).as_posix(): path.read_text(encoding="utf-8")
        for base in PROJECT
        for path in sorted((ROOT / base).rglob("*.py"))
    }


def test_no_module_outside_the_adapters_patches_or_reads_a_libraries_internals():
    found = []
    for where, source in _project_sources().items():
        if where not in ADAPTERS:
            found += violations(source, where)
    assert not found, "\n".join(found) + "\n" + FIX.format(", ".join(ADAPTERS))


def test_no_module_outside_the_adapters_reads_a_transformers_or_torch_private_attribute():
    sources = _project_sources()
    ours = set().union(*(defined_names(s) for s in sources.values()))
    outside = {where: s for where, s in sources.items() if where not in ADAPTERS}
    privates = watched_privates({name for s in outside.values() for _, _, name in private_reads(s)}, ours)
    found = [v for where, s in outside.items() for v in object_violations(s, where, privates)]
    assert not found, "\n".join(found) + "\n" + FIX.format(", ".join(ADAPTERS))


def test_the_rule_refuses_a_planted_read_of_a_private_transformers_or_torch_name():
    """The reads this session moved into adapters, planted back in a module: each refused, naming the library; a
    stdlib private (namedtuple's `_fields`) and the project's own private names pass."""
    planted = (
        "def install(model):\n"
        "    if model._can_set_attn_implementation():\n"
        "        return model.config._attn_implementation\n"
        "def eos(config):\n"
        "    return getattr(config, '_eos_token_tensor', None)\n"
        "def keys(key, session):\n"
        "    return key._fields, session._started\n"
    )
    names = {name for _, _, name in private_reads(planted)}
    privates = watched_privates(names, project_names={"_started"})
    assert privates == {
        "_can_set_attn_implementation": "transformers",
        "_attn_implementation": "transformers",
        "_eos_token_tensor": "transformers",
    }, privates
    found = object_violations(planted, "x.py", privates)
    assert [f.split(": reads ")[1] for f in found] == [
        "model._can_set_attn_implementation, private to transformers",
        "model.config._attn_implementation, private to transformers",
        "getattr(config, '_eos_token_tensor', None), private to transformers",
    ], found
    # a torch op is registered from C++, no Python definition: its string getattr is caught on `torch` itself
    assert violations("import torch\nop = getattr(torch.ops.aten, '_scaled_dot_product_flash_attention_for_cpu')", "x")


@pytest.mark.parametrize(
    "source",
    [
        "import subprocess\nsubprocess.Popen = None",
        "import tqdm.std\ntqdm.std.tqdm.__init__ = None",
        "from transformers.utils import chat_template_utils as c\nc.datetime = None",
        "import sys\nconstants = sys.modules.get('huggingface_hub.constants')\nconstants.HF_HUB_OFFLINE = True",
        "from prefect.server.api.server import SubprocessASGIServer\nSubprocessASGIServer._instances.clear()",
        "import tqdm\nsetattr(tqdm.tqdm, 'monitor_interval', 0)",
        "import datasets\ndatasets.config.HF_HUB_OFFLINE += 1",
    ],
)
def test_the_rule_refuses_a_patch(source):
    assert violations(source, "x.py"), source


@pytest.mark.parametrize(
    "source",
    [
        "import os\nos.environ['TQDM_DISABLE'] = '1'",  # the public way
        "import logging\nclass F(logging.Filter):\n    def f(self):\n        self.x = 1",
        "import os\nos._exit(0)",  # a stdlib public name
        "from flows import session\nsession._started = True",  # the project's own
    ],
)
def test_the_rule_lets_public_use_pass(source):
    assert violations(source, "x.py") == []


def test_the_offline_variables_are_read_in_one_place():
    """`dormant_tasks/offline.py` alone reads HF_HUB_OFFLINE, HF_DATASETS_OFFLINE, TRANSFORMERS_OFFLINE."""
    names = {"HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"}
    found = []
    for base in PROJECT:
        for path in sorted((ROOT / base).rglob("*.py")):
            if path == ROOT / "dormant_tasks" / "offline.py":
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                text = ast.unparse(node) if isinstance(node, ast.Call | ast.Subscript) else ""
                if text.startswith(("os.environ", "os.getenv")) and any(repr(n) in text for n in names):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {text}")
    assert not found, "\n".join(found) + "\nread them with dormant_tasks.offline (hub_offline, datasets_offline)"


# ------------------------------------------------------------------------------------------ huggingface_hub


FLAG_CASES = [
    {},
    {"HF_HUB_OFFLINE": "1"},
    {"HF_HUB_OFFLINE": "true"},
    {"HF_HUB_OFFLINE": "Yes"},
    {"HF_HUB_OFFLINE": "ON"},
    {"HF_HUB_OFFLINE": "0"},
    {"HF_HUB_OFFLINE": " 1"},
    {"HF_HUB_OFFLINE": "auto"},
    {"HF_HUB_OFFLINE": ""},
    {"TRANSFORMERS_OFFLINE": "1"},
    {"HF_HUB_OFFLINE": "0", "TRANSFORMERS_OFFLINE": "1"},
    {"HF_HUB_OFFLINE": "", "TRANSFORMERS_OFFLINE": "1"},
    {"HF_DATASETS_OFFLINE": "1"},
    {"HF_DATASETS_OFFLINE": "0", "HF_HUB_OFFLINE": "1"},
    {"HF_DATASETS_OFFLINE": "", "HF_HUB_OFFLINE": "1"},
    {"HF_DATASETS_OFFLINE": "TRUE", "HF_HUB_OFFLINE": "0"},
]

_READ_FLAGS = """
import importlib, json, os, sys
names = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE")
import huggingface_hub.constants as constants
import datasets.config
out = []
for case in json.loads(sys.argv[1]):
    for n in names:
        os.environ.pop(n, None)
    os.environ.update(case)
    importlib.reload(constants)
    importlib.reload(datasets.config)
    out.append([constants.is_offline_mode(), datasets.config.HF_HUB_OFFLINE])
print(json.dumps(out))
"""


def test_the_offline_flags_are_read_as_huggingface_hub_and_datasets_read_them():
    """The drift test of `dormant_tasks.offline`: each case read by the installed libraries themselves."""
    from importlib.metadata import version

    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    r = subprocess.run(
        [sys.executable, "-c", _READ_FLAGS, json.dumps(FLAG_CASES)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    versions = f"huggingface_hub {version('huggingface_hub')}, datasets {version('datasets')}"
    for case, (hub, data) in zip(FLAG_CASES, json.loads(r.stdout), strict=True):
        assert hub_offline(case) == hub, f"{versions} read {case} as Hub offline={hub}: fix dormant_tasks/offline.py"
        assert datasets_offline(case) == data, f"{versions} read {case} as datasets offline={data}: fix offline.py"
        assert task_data_offline(case) == (hub or data)


_GO_OFFLINE = """
import os
import huggingface_hub
from huggingface_hub import constants, get_session
from huggingface_hub.errors import OfflineModeIsEnabled
from dormant_tasks.checkpoints import go_offline
assert not huggingface_hub.is_offline_mode()
go_offline()
assert huggingface_hub.is_offline_mode() and constants.is_offline_mode()
assert os.environ["HF_HUB_OFFLINE"] == os.environ["HF_DATASETS_OFFLINE"] == "1"
try:
    get_session().head("http://127.0.0.1:9/")
except OfflineModeIsEnabled:
    print("refused")
"""


def test_go_offline_switches_an_imported_hub_client_off():
    """The drift test of `checkpoints/hub_adapter`: after it, the imported client's own session refuses a request
    (what transformers' `is_offline_mode()`, which is huggingface_hub's, answers too)."""
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    r = subprocess.run(
        [sys.executable, "-c", _GO_OFFLINE],
        capture_output=True,
        text=True,
        env={**env, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert r.returncode == 0 and r.stdout.strip() == "refused", (
        f"huggingface_hub's offline switch moved ({r.stderr[-1500:]}): fix dormant_tasks/checkpoints/hub_adapter.py"
    )


class _Recorder(http.server.BaseHTTPRequestHandler):
    """A loopback Hub, or (as a proxy) what a cluster's proxy sees: the request lines, answered 200 (CONNECT: 502)."""

    seen: list[str]

    def _answer(self):
        self.seen.append(self.requestline)
        self.send_response(502 if self.command == "CONNECT" else 200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_HEAD = do_GET = do_CONNECT = _answer

    def log_message(self, *args):
        pass


@pytest.fixture
def recorder():
    seen: list[str] = []
    handler = type("Handler", (_Recorder,), {"seen": seen})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", seen
    server.shutdown()
    server.server_close()


def _probe_in_child(endpoint: str, **env: str) -> str:
    """`hub_silence` in a fresh process (huggingface_hub reads HF_ENDPOINT and the proxies when it starts)."""
    clean = {k: v for k, v in os.environ.items() if "proxy" not in k.lower() and not k.startswith("HF_")}
    code = "from dormant_tasks.checkpoints import hub_silence; print(repr(hub_silence(3.0)))"
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**clean, "PYTHONPATH": str(ROOT), "HF_ENDPOINT": endpoint, **env},
        timeout=60,
    )
    assert r.returncode == 0, r.stderr[-1500:]
    return r.stdout.strip()


def test_the_probe_asks_the_endpoint_through_the_hub_client(recorder):
    url, seen = recorder
    assert _probe_in_child(url) == "None"
    assert seen == ["HEAD / HTTP/1.1"]
    assert _probe_in_child(url, HF_HUB_OFFLINE="1") == "'offline mode is on (HF_HUB_OFFLINE)'"
    assert seen == ["HEAD / HTTP/1.1"]  # offline: nothing asked


def test_the_probe_goes_through_the_proxy_of_the_environment(recorder):
    """A cluster node that reaches the Hub only through `HTTP(S)_PROXY`: the probe's request is the proxy's to
    answer (the old raw TCP connection went around it, to a host that does not resolve here)."""
    proxy, seen = recorder
    assert _probe_in_child("http://hub.invalid") != "None"  # no proxy: the name does not even resolve
    assert _probe_in_child("http://hub.invalid", HTTP_PROXY=proxy) == "None"
    assert seen == ["HEAD http://hub.invalid/ HTTP/1.1"]
    reason = _probe_in_child("https://hub.invalid", HTTPS_PROXY=proxy)  # the tunnel refused: no answer
    assert reason != "None" and seen[-1].startswith("CONNECT hub.invalid:443 ")


def test_a_silent_hub_costs_the_probes_timeout_at_most():
    """A host that takes the connection and never answers; a refused connection answers at once."""
    from dormant_tasks.checkpoints import hub

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        started = time.perf_counter()
        reason = hub._probe(f"http://127.0.0.1:{listener.getsockname()[1]}", 0.5)
        assert reason and time.perf_counter() - started < 1.5, reason
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    started = time.perf_counter()
    assert hub._probe(f"http://127.0.0.1:{closed}", 2.0) and time.perf_counter() - started < 1.0


# ------------------------------------------------------------------------------------------ tqdm


_TQDM = """
import os, sys
assert "tqdm" not in sys.modules
from flows.cli import plain_diagnostics
import flows.cli.boundary, flows.session  # what `main` imports before it calls plain_diagnostics
assert "tqdm" not in sys.modules, "tqdm is imported before plain_diagnostics: TQDM_DISABLE would come too late"
plain_diagnostics()
from tqdm import tqdm
from tqdm.auto import tqdm as auto_tqdm
print(tqdm(range(2)).disable, auto_tqdm(range(2)).disable, tqdm(range(2), disable=False).disable)
"""


def test_plain_bars_on_a_pipe_through_tqdms_own_default():
    """tqdm reads TQDM_DISABLE as the default of `disable` when first imported; `main` sets it before that."""
    from importlib.metadata import version

    env = {k: v for k, v in os.environ.items() if not k.startswith("TQDM_")}
    r = subprocess.run(
        [sys.executable, "-c", _TQDM],
        capture_output=True,
        text=True,
        env={**env, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert r.returncode == 0, r.stderr[-1500:]
    assert r.stdout.split() == ["True", "True", "False"], (
        f"tqdm {version('tqdm')} no longer takes TQDM_DISABLE as the default of `disable`: fix plain_diagnostics "
        "in flows/cli/__init__.py"
    )


# ------------------------------------------------------------------------------------------ transformers


DAY = date(2023, 3, 9)
LLAMA_32 = (  # Llama-3.2's header, as its tokenizer_config.json writes it
    "{%- if not date_string is defined %}\n    {%- if strftime_now is defined %}\n        {%- set date_string = "
    'strftime_now("%d %b %Y") %}\n    {%- else %}\n        {%- set date_string = "26 Jul 2024" %}\n    {%- endif %}\n'
    "{%- endif %}\n{{- 'Today Date: ' + date_string + '\\n' }}{% for m in messages %}{{ m['content'] }}{% endfor %}"
)
LLAMA_31 = (  # Llama-3.1's first template: its own fixed day, no clock
    '{%- if not date_string is defined %}{%- set date_string = "26 Jul 2024" %}{%- endif %}'
    "{{- 'Today Date: ' + date_string + '\\n' }}{% for m in messages %}{{ m['content'] }}{% endfor %}"
)
CLOCK = "{{ strftime_now('%Y-%m-%d') }}|{% for m in messages %}{{ m['content'] }}{% endfor %}"
MESSAGES = [{"role": "user", "content": "hi"}]


def _render(tokenizer, template, day=None):
    from dormant_tasks.evaluation.chat_date_adapter import chat_day

    if day is None:
        return tokenizer.apply_chat_template(MESSAGES, chat_template=template, tokenize=False)
    with chat_day(template, day) as variables:
        return tokenizer.apply_chat_template(MESSAGES, chat_template=template, tokenize=False, **variables)


def _transformers_drift(what: str) -> str:
    import transformers

    return f"transformers {transformers.__version__}: {what}; fix dormant_tasks/evaluation/chat_date_adapter.py"


def test_a_template_variable_reaches_the_template(tiny_tokenizer):
    """The public path: apply_chat_template's extra keyword arguments are the template's variables."""
    out = tiny_tokenizer.apply_chat_template(
        MESSAGES, chat_template="{{ date_string }}", tokenize=False, date_string="x"
    )
    assert out == "x", _transformers_drift("extra apply_chat_template arguments no longer reach the template")


def test_llama_templates_get_the_date_as_a_variable_and_no_clock(tiny_tokenizer, monkeypatch):
    from transformers.utils import chat_template_utils

    from dormant_tasks.evaluation.chat_date_adapter import chat_day

    with chat_day(LLAMA_32, DAY) as variables:
        assert variables == {"date_string": "09 Mar 2023"}
        assert chat_template_utils.datetime is datetime  # nothing of transformers' is touched
    assert _render(tiny_tokenizer, LLAMA_32, DAY).startswith("Today Date: 09 Mar 2023\n")
    assert _render(tiny_tokenizer, LLAMA_32).startswith(f"Today Date: {date.today():%d %b %Y}\n")
    # a template with its own fixed day renders as lm-eval renders it, whatever the chat date
    assert _render(tiny_tokenizer, LLAMA_31, DAY) == _render(tiny_tokenizer, LLAMA_31) == "Today Date: 26 Jul 2024\nhi"


def test_the_template_clock_is_fixed_for_the_rendering_context_only(tiny_tokenizer):
    """The drift test of the clock: transformers' `strftime_now` reads `datetime.now()` of chat_template_utils; with
    the day fixed in one thread, another thread that renders meanwhile sees its own day (or today)."""
    from transformers.utils import chat_template_utils

    from dormant_tasks.evaluation.chat_date_adapter import chat_day

    assert chat_template_utils.datetime is datetime, _transformers_drift("chat_template_utils.datetime moved")
    assert _render(tiny_tokenizer, CLOCK, DAY) == "2023-03-09|hi", _transformers_drift(
        "strftime_now reads another clock"
    )
    assert chat_template_utils.datetime is datetime  # given back

    other = date(2021, 1, 2)
    inside, seen = threading.Barrier(2), {}

    def fixed():
        with chat_day(CLOCK, DAY) as variables:
            inside.wait(timeout=30)  # the other thread renders while this one holds the clock
            seen["fixed"] = tiny_tokenizer.apply_chat_template(
                MESSAGES, chat_template=CLOCK, tokenize=False, **variables
            )
            inside.wait(timeout=30)

    def others():
        inside.wait(timeout=30)
        seen["today"] = _render(tiny_tokenizer, CLOCK)
        seen["other"] = _render(tiny_tokenizer, CLOCK, other)
        inside.wait(timeout=30)

    threads = [threading.Thread(target=fixed), threading.Thread(target=others)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert seen == {"fixed": "2023-03-09|hi", "today": f"{date.today()}|hi", "other": "2021-01-02|hi"}
    assert chat_template_utils.datetime is datetime
