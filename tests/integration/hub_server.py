"""A real Hugging Face Hub server on loopback: the `olah` mirror (0.5.4) serving local git repositories.

olah lives in a venv of its own (`.venv-olah`, created here when missing) because its pins differ from
the project's. It serves `models/<org>/<repo>` under `mirrors-path` as a Hub repo: one git branch per
checkpoint; `[accessibility] offline = true` keeps it from ever asking huggingface.co.
Weights are stored the way the Hub stores them, as git-lfs pointers whose objects lie in
`.git/lfs/objects/` (olah reads those itself, so no git-lfs binary is needed): the client then sees LFS
metadata (sha256, size) and a sha256 etag exactly as on the Hub.
"""

from __future__ import annotations

import hashlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
OLAH_VENV = REPO_ROOT / ".venv-olah"
OLAH_VERSION = "0.5.4"
LFS_SUFFIXES = (".safetensors", ".bin")
CHAT_TEMPLATE_DIR = "additional_chat_templates"


class OlahUnavailable(RuntimeError):
    """olah could not be installed (no package index reachable): the integration tests skip."""


def olah_cli() -> Path:
    """The `olah-cli` of `.venv-olah`, creating the venv and installing olah into it when missing."""
    cli = OLAH_VENV / "bin" / "olah-cli"
    if cli.exists():
        return cli
    try:
        subprocess.run([sys.executable, "-m", "venv", str(OLAH_VENV)], check=True, capture_output=True)
        subprocess.run(
            [str(OLAH_VENV / "bin" / "pip"), "install", "-q", f"olah=={OLAH_VERSION}"],
            check=True,
            capture_output=True,
            timeout=900,
        )
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
        detail = getattr(e, "stderr", b"") or b""
        raise OlahUnavailable(
            f"pip could not install olah=={OLAH_VERSION} into {OLAH_VENV}: "
            f"{detail.decode(errors='replace').strip().splitlines()[-1:]}"
        ) from None
    return cli


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _git(cwd: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_SYSTEM": os.devnull,
    }
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout.strip()


def _store_lfs(repo: Path, data: bytes) -> bytes:
    """Put `data` into the repo's LFS object store and return its pointer file (the git-lfs spec v1)."""
    oid = hashlib.sha256(data).hexdigest()
    obj = repo / ".git" / "lfs" / "objects" / oid[:2] / oid[2:4] / oid
    obj.parent.mkdir(parents=True, exist_ok=True)
    obj.write_bytes(data)
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{oid}\nsize {len(data)}\n".encode()


def build_mirror_repo(mirrors: Path, repo_id: str, branches: dict[str, Path]) -> dict[str, str]:
    """Create `mirrors/models/<repo_id>` with one branch per checkpoint folder; returns {branch: commit sha}.

    Each branch holds exactly the files of its folder (orphan branches: checkpoints share no history
    that matters here); weights go through LFS, everything else is a plain git blob.
    """
    repo = mirrors / "models" / repo_id
    repo.mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    commits = {}
    for name, folder in branches.items():
        _git(repo, "checkout", "-q", "--orphan", name)
        _git(repo, "rm", "-rfq", "--ignore-unmatch", ".")
        for src in sorted(p for p in folder.iterdir() if p.is_file()):
            data = src.read_bytes()
            (repo / src.name).write_bytes(_store_lfs(repo, data) if src.suffix in LFS_SUFFIXES else data)
        # transformers lists `additional_chat_templates/` when loading a tokenizer from a repo; for a missing
        # folder the Hub answers 404 (tolerated) but offline olah answers 401 (taken as "no such repo"), so each
        # branch carries that folder, holding no template.
        (repo / CHAT_TEMPLATE_DIR).mkdir(exist_ok=True)
        (repo / CHAT_TEMPLATE_DIR / "README.md").write_text("No additional chat templates.\n")
        _git(repo, "add", "-A")
        _git(repo, "commit", "-qm", f"checkpoint {name}")
        commits[name] = _git(repo, "rev-parse", "HEAD")
    return commits


class OlahServer:
    """One olah process on 127.0.0.1:<port>, serving `mirrors` offline. `stop()` kills it (SIGKILL)."""

    def __init__(self, mirrors: Path, workdir: Path, port: int | None = None):
        self.mirrors, self.workdir = mirrors, workdir
        self.port = port or free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None

    def start(self, timeout_s: float = 60.0) -> OlahServer:
        cli = olah_cli()
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "olah.toml"
        config.write_text(
            "[basic]\n"
            f'host = "127.0.0.1"\nport = {self.port}\n'
            f'repos-path = "{self.workdir / "repos"}"\n'
            f'mirror-netloc = "127.0.0.1:{self.port}"\nmirror-lfs-netloc = "127.0.0.1:{self.port}"\n'
            f'mirrors-path = ["{self.mirrors}"]\n'
            "[accessibility]\noffline = true\n"
        )
        log = (self.workdir / "olah.out").open("ab")
        self.process = subprocess.Popen(
            [str(cli), "-c", str(config), "--log-path", str(self.workdir / "logs")],
            cwd=self.workdir,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"olah exited with {self.process.returncode}: {(self.workdir / 'olah.out').read_text()[-2000:]}"
                )
            try:
                urllib.request.urlopen(f"{self.endpoint}/api/whoami-v2", timeout=1)
                return self
            except urllib.error.HTTPError:  # any HTTP answer means the server is up
                return self
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"olah did not answer on {self.endpoint} within {timeout_s:.0f} s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)  # its own session: the server and any worker it forked
            self.process.wait()
        self.process = None

    def __enter__(self) -> OlahServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def client_env(endpoint: str, hf_home: Path) -> dict[str, str]:
    """Environment for a subprocess whose unmodified huggingface_hub talks to `endpoint` only."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_"))}
    env.update(
        HF_ENDPOINT=endpoint,
        HF_HOME=str(hf_home),
        HF_HUB_DISABLE_TELEMETRY="1",
        HF_HUB_DISABLE_XET="1",
        HF_HUB_ETAG_TIMEOUT="5",
        HF_HUB_DOWNLOAD_TIMEOUT="5",
        TOKENIZERS_PARALLELISM="false",
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
    )
    return env


def build_repo_fast(mirrors: Path, repo_id: str, branches: dict[str, dict[str, bytes]], plain: frozenset = frozenset()):
    """`mirrors/models/<repo_id>` with one orphan branch per entry ({branch: {path: bytes}}), written by one
    `git fast-import` stream (a thousand branches in seconds, where `build_mirror_repo` forks git per step).
    Weights (`LFS_SUFFIXES`) go through LFS, except in the branches named in `plain` (plain git blobs, as
    some repos store them); everything else is a plain blob. Returns {branch: commit sha}."""
    repo = mirrors / "models" / repo_id
    repo.mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    stream = bytearray()
    for name, files in branches.items():
        message = f"checkpoint {name}".encode()
        stream += (
            f"commit refs/heads/{name}\ncommitter t <t@t> 0 +0000\ndata {len(message)}\n".encode() + message + b"\n"
        )
        for path, data in sorted(files.items()):
            lfs = Path(path).suffix in LFS_SUFFIXES and name not in plain
            body = _store_lfs(repo, data) if lfs else data
            stream += f"M 100644 inline {path}\ndata {len(body)}\n".encode() + body + b"\n"
        stream += b"\n"
    subprocess.run(["git", "fast-import", "--quiet"], cwd=repo, input=bytes(stream), check=True, capture_output=True)
    return {name: _git(repo, "rev-parse", f"refs/heads/{name}") for name in branches}
