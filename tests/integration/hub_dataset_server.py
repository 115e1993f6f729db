"""A loopback Hub that takes commits to dataset repos, for `dormant publish` against the real huggingface_hub client.

Why a server of our own: the tests' other Hub (`hub_server.py`, olah) is a read-only mirror; it cannot create a
repo or take a commit. This one implements, in memory, exactly the endpoints the installed client (huggingface_hub
2.x) calls to create a dataset repo, commit to it, and read it back through `HfApi` and `HfFileSystem`:

    POST /api/repos/create                                  create_repo (409 when it exists: exist_ok)
    GET  /api/datasets/{repo}[/revision/{rev}]              repo_info / dataset_info (the head commit, siblings)
    GET  /api/datasets/{repo}/tree/{rev}[/{path}]           list_repo_tree, HfFileSystem.ls/find (recursive or not)
    POST /api/datasets/{repo}/paths-info/{rev}              get_paths_info, HfFileSystem.info
    POST /api/validate-yaml                                 create_commit's check of a README.md's metadata
    POST /api/datasets/{repo}/preupload/{rev}               preupload: "lfs" or "regular" per file, its remote oid
    POST /datasets/{repo}.git/info/lfs/objects/batch        the git-lfs batch API (basic transfer)
    PUT  /_lfs/{oid}   POST /_lfs/verify                    the upload and verify actions the batch API hands out
    POST /api/datasets/{repo}/commit/{rev}                  the commit: NDJSON header, files, lfsFiles, deletions
    GET|HEAD /datasets/{repo}/resolve/{rev}/{path}          file downloads (HfFileSystem.get_file, cat)

What is faked, and why:
- Xet. With `hf_xet` installed (it is here) the client uploads LFS-mode files through the Xet protocol (chunked
  xorbs and shards sent to a CAS service), which no loopback server of ours can speak. The client's own switch,
  `HF_HUB_DISABLE_XET=1`, sends them through the git-lfs batch API instead; the tests set it and say so. Small text
  files (README.md, the JSON records) go inline in the commit ("regular") either way, as on the Hub.
- Storage and auth. Repos live in memory; a request with a token in `tokens` may write, any other is refused
  (401). Upload modes follow the repo's `.gitattributes` (created with the repo, as the Hub does: `*.parquet` is
  LFS) and a NUL byte in the sample, as the Hub decides them.
- A commit is applied whole under one lock, or not at all: the property a killed or failed upload relies on.
Failure hooks for the tests: `hold_uploads` (an LFS PUT signals `upload_started`, then waits for `release`),
`drop_commit` (the commit request's connection is closed without an answer, nothing applied).
"""

from __future__ import annotations

import base64
import fnmatch
import hashlib
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlparse

GITATTRIBUTES = b"".join(
    f"{pattern} filter=lfs diff=lfs merge=lfs -text\n".encode()
    for pattern in ("*.7z", "*.arrow", "*.bin", "*.gz", "*.parquet", "*.pkl", "*.pt", "*.safetensors", "*.zip", "*.zst")
)


def git_oid(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass(frozen=True)
class Blob:
    data: bytes
    lfs: bool

    def entry(self, path: str) -> dict:
        """The tree entry the Hub gives for a file: its git oid (of the LFS pointer for an LFS file)."""
        if not self.lfs:
            return {"type": "file", "oid": git_oid(self.data), "size": len(self.data), "path": path}
        sha = hashlib.sha256(self.data).hexdigest()
        pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha}\nsize {len(self.data)}\n".encode()
        return {
            "type": "file",
            "oid": git_oid(pointer),
            "size": len(self.data),
            "path": path,
            "lfs": {"oid": sha, "size": len(self.data), "pointerSize": len(pointer)},
        }


@dataclass
class Repo:
    private: bool
    commits: list[tuple[str, dict[str, Blob], str]] = field(default_factory=list)  # (oid, files, summary)

    @property
    def head(self) -> tuple[str, dict[str, Blob], str]:
        return self.commits[-1]

    def at(self, revision: str) -> tuple[str, dict[str, Blob], str] | None:
        if revision == "main":
            return self.head
        return next((c for c in self.commits if c[0] == revision), None)


class DatasetHub(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, tokens=("hf_writer",)):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.endpoint = f"http://127.0.0.1:{self.server_address[1]}"
        self.tokens = set(tokens)
        self.repos: dict[str, Repo] = {}
        self.lfs: dict[str, bytes] = {}  # sha256 -> content
        self.lock = threading.Lock()
        self.calls: list[tuple[str, str]] = []  # (method, path without the repo id): which endpoints were used
        self.hold_uploads = False
        self.upload_started = threading.Event()
        self.release = threading.Event()
        self.drop_commit = False
        self._thread: threading.Thread | None = None

    def __enter__(self) -> DatasetHub:
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.release.set()
        self.shutdown()
        self.server_close()

    # ---- what the tests read ----

    def commit_count(self, repo_id: str) -> int:
        return len(self.repos[repo_id].commits) if repo_id in self.repos else 0

    def files(self, repo_id: str) -> dict[str, bytes]:
        return {p: b.data for p, b in self.repos[repo_id].head[1].items()}

    def add_commit(self, repo_id: str, files: dict[str, bytes], summary: str = "by hand") -> str:
        """A commit made by someone else (a file the tool did not write)."""
        with self.lock:
            repo = self.repos[repo_id]
            new = dict(repo.head[1]) | {p: Blob(d, p.endswith(".parquet")) for p, d in files.items()}
            return self._commit(repo, new, summary)

    def _commit(self, repo: Repo, files: dict[str, Blob], summary: str) -> str:
        parent = repo.commits[-1][0] if repo.commits else ""
        digest = hashlib.sha1(f"{parent}\0{summary}\0{len(repo.commits)}".encode())
        for path in sorted(files):
            digest.update(f"{path}\0{git_oid(files[path].data)}\n".encode())
        oid = digest.hexdigest()
        repo.commits.append((oid, files, summary))
        return oid


class _Handler(BaseHTTPRequestHandler):
    server: DatasetHub
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # quiet: the tests read `calls`
        pass

    # ---- plumbing ----

    def _body(self) -> bytes:
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def _send(self, status: int, payload=None, raw: bytes | None = None, headers: dict | None = None) -> None:
        data = raw if raw is not None else json.dumps(payload if payload is not None else {}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream" if raw is not None else "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _error(self, status: int, message: str, code: str | None = None) -> None:
        self._send(
            status, {"error": message}, headers={"X-Error-Code": code, "X-Error-Message": message} if code else None
        )

    def _authorized(self) -> bool:
        token = (self.headers.get("Authorization") or "").removeprefix("Bearer ").strip()
        return token in self.server.tokens

    def _repo(self, repo_id: str) -> Repo | None:
        repo = self.server.repos.get(repo_id)
        if repo is None or (repo.private and not self._authorized()):
            self._error(404 if repo is None or self._authorized() else 401, "Repository not found", "RepoNotFound")
            return None
        return repo

    def _revision(self, repo: Repo, revision: str):
        found = repo.at(unquote(revision))
        if found is None:
            self._error(404, f"Invalid rev id: {revision}", "RevisionNotFound")
        return found

    def _log(self, route: str) -> None:
        with self.server.lock:
            self.server.calls.append((self.command, route))

    # ---- routes ----

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        url = urlparse(self.path)
        parts = [unquote(p) for p in url.path.split("/")]
        if url.path.startswith("/api/datasets/") and len(parts) == 5:
            self._log("repo_info")
            return self._repo_info("/".join(parts[3:5]), "main")
        if url.path.startswith("/api/datasets/") and len(parts) >= 7 and parts[5] == "revision":
            self._log("repo_info")
            return self._repo_info("/".join(parts[3:5]), "/".join(parts[6:]))
        if url.path.startswith("/api/datasets/") and len(parts) >= 7 and parts[5] == "tree":
            self._log("tree")
            query = parse_qs(url.query)
            recursive = query.get("recursive", ["false"])[0].lower() == "true"
            return self._tree("/".join(parts[3:5]), parts[6], "/".join(parts[7:]), recursive)
        if url.path.startswith("/datasets/") and len(parts) >= 6 and parts[4] == "resolve":
            self._log("resolve")
            return self._resolve("/".join(parts[2:4]), parts[5], "/".join(parts[6:]))
        if url.path == "/api/whoami-v2":
            return self._send(200, {"type": "user", "name": "tester"}) if self._authorized() else self._error(401, "no")
        self._error(404, f"no route {url.path}")

    def do_PUT(self) -> None:
        url = urlparse(self.path)
        if url.path.startswith("/_lfs/"):
            self._log("lfs_upload")
            oid = url.path.removeprefix("/_lfs/")
            data = self._body()
            if self.server.hold_uploads:
                self.server.upload_started.set()
                self.server.release.wait(timeout=120)
            if hashlib.sha256(data).hexdigest() != oid:
                return self._error(400, "content does not match its oid")
            with self.server.lock:
                self.server.lfs[oid] = data
            return self._send(200, {})
        self._error(404, f"no route {url.path}")

    def do_POST(self) -> None:
        url = urlparse(self.path)
        parts = [unquote(p) for p in url.path.split("/")]
        body = self._body()
        if url.path == "/api/repos/create":
            self._log("create_repo")
            return self._create(json.loads(body))
        if url.path == "/api/validate-yaml":
            self._log("validate_yaml")
            return self._send(200, {"errors": [], "warnings": []})
        if url.path.startswith("/api/datasets/") and len(parts) >= 7 and parts[5] == "paths-info":
            self._log("paths_info")
            return self._paths_info("/".join(parts[3:5]), parts[6], body)
        if url.path.startswith("/api/datasets/") and len(parts) >= 7 and parts[5] == "preupload":
            self._log("preupload")
            return self._preupload("/".join(parts[3:5]), json.loads(body))
        if url.path.startswith("/api/datasets/") and len(parts) >= 7 and parts[5] == "commit":
            self._log("commit")
            return self._commit("/".join(parts[3:5]), body)
        if url.path.startswith("/datasets/") and url.path.endswith(".git/info/lfs/objects/batch"):
            self._log("lfs_batch")
            return self._batch(json.loads(body))
        if url.path == "/_lfs/verify":
            self._log("lfs_verify")
            oid = json.loads(body)["oid"]
            return self._send(200, {}) if oid in self.server.lfs else self._error(404, "object not uploaded")
        self._error(404, f"no route {url.path}")

    # ---- the endpoints ----

    def _create(self, payload: dict) -> None:
        if not self._authorized():
            return self._error(401, "Invalid username or password.")
        if payload.get("type") != "dataset":
            return self._error(400, "this test Hub holds dataset repos only")
        repo_id = f"{payload['organization']}/{payload['name']}" if payload.get("organization") else payload["name"]
        with self.server.lock:
            if repo_id in self.server.repos:
                return self._error(409, "You already created this dataset repo")
            repo = Repo(private=payload.get("visibility") == "private" or bool(payload.get("private")))
            self.server._commit(repo, {".gitattributes": Blob(GITATTRIBUTES, False)}, "initial commit")
            self.server.repos[repo_id] = repo
        self._send(200, {"url": f"{self.server.endpoint}/datasets/{repo_id}", "name": repo_id})

    def _repo_info(self, repo_id: str, revision: str) -> None:
        repo = self._repo(repo_id)
        found = repo and self._revision(repo, revision)
        if not found:
            return
        oid, files, _ = found
        info = {
            "id": repo_id,
            "author": repo_id.split("/")[0],
            "sha": oid,
            "private": repo.private,
            "disabled": False,
            "gated": False,
            "downloads": 0,
            "likes": 0,
            "tags": [],
            "siblings": [{"rfilename": p} for p in sorted(files)],
        }
        self._send(200, info)

    def _tree(self, repo_id: str, revision: str, folder: str, recursive: bool) -> None:
        repo = self._repo(repo_id)
        found = repo and self._revision(repo, revision)
        if not found:
            return
        entries = _tree_entries(found[1], folder.strip("/"), recursive)
        if entries is None:
            return self._error(404, f"no folder {folder}", "EntryNotFound")
        self._send(200, entries)

    def _paths_info(self, repo_id: str, revision: str, body: bytes) -> None:
        repo = self._repo(repo_id)
        found = repo and self._revision(repo, revision)
        if not found:
            return
        if self.headers.get("Content-Type", "").startswith("application/json"):
            paths = json.loads(body).get("paths", [])
        else:
            paths = parse_qs(body.decode()).get("paths", [])
        files = found[1]
        out = []
        for p in paths:
            p = p.strip("/")
            if p in files:
                out.append(files[p].entry(p))
            elif any(f.startswith(p + "/") for f in files):
                out.append({"type": "directory", "oid": git_oid(p.encode()), "size": 0, "path": p})
        self._send(200, out)

    def _preupload(self, repo_id: str, payload: dict) -> None:
        repo = self._repo(repo_id)
        if not repo:
            return
        if not self._authorized():
            return self._error(401, "no write access")
        files = repo.head[1]
        patterns = [
            line.split()[0] for line in files[".gitattributes"].data.decode().splitlines() if "filter=lfs" in line
        ]
        out = []
        for f in payload["files"]:
            sample = base64.b64decode(f["sample"])
            lfs = any(fnmatch.fnmatch(f["path"].rsplit("/", 1)[-1], p) for p in patterns) or b"\0" in sample
            existing = files.get(f["path"])
            oid = None
            if existing is not None:
                oid = hashlib.sha256(existing.data).hexdigest() if existing.lfs else git_oid(existing.data)
            out.append(
                {"path": f["path"], "uploadMode": "lfs" if lfs else "regular", "shouldIgnore": False, "oid": oid}
            )
        self._send(200, {"files": out})

    def _batch(self, payload: dict) -> None:
        if not self._authorized():
            return self._error(401, "no write access")
        objects = []
        for obj in payload["objects"]:
            entry = {"oid": obj["oid"], "size": obj["size"], "authenticated": True}
            if obj["oid"] not in self.server.lfs:  # already stored: no action, the client skips it
                entry["actions"] = {
                    "upload": {"href": f"{self.server.endpoint}/_lfs/{obj['oid']}", "header": {}},
                    "verify": {"href": f"{self.server.endpoint}/_lfs/verify", "header": {}},
                }
            objects.append(entry)
        self._send(200, {"transfer": "basic", "objects": objects})

    def _commit(self, repo_id: str, body: bytes) -> None:
        repo = self._repo(repo_id)
        if not repo:
            return
        if not self._authorized():
            return self._error(401, "no write access")
        if self.server.drop_commit:  # the network fails mid-request: no answer, nothing applied
            self.close_connection = True
            self.connection.shutdown(2)
            return
        lines = [json.loads(line) for line in body.decode().splitlines() if line.strip()]
        header = lines[0]["value"]
        with self.server.lock:
            if header.get("parentCommit") and header["parentCommit"] != repo.head[0]:
                return self._error(412, "A commit has happened since. Please refresh and try again.")
            files = dict(repo.head[1])
            for item in lines[1:]:
                value = item["value"]
                if item["key"] == "file":
                    files[value["path"]] = Blob(base64.b64decode(value["content"]), False)
                elif item["key"] == "lfsFile":
                    if value["oid"] not in self.server.lfs:
                        return self._error(400, f"LFS object {value['oid']} of {value['path']} was not uploaded")
                    files[value["path"]] = Blob(self.server.lfs[value["oid"]], True)
                elif item["key"] == "deletedFile":
                    if value["path"] not in files:
                        return self._error(404, "A file with this name doesn't exist", "EntryNotFound")
                    del files[value["path"]]
                elif item["key"] == "deletedFolder":
                    files = {p: b for p, b in files.items() if not p.startswith(value["path"].rstrip("/") + "/")}
                else:
                    return self._error(400, f"unknown commit operation {item['key']}")
            oid = self.server._commit(repo, files, header["summary"])
        self._send(
            200,
            {"commitUrl": f"{self.server.endpoint}/datasets/{repo_id}/commit/{oid}", "commitOid": oid, "success": True},
        )

    def _resolve(self, repo_id: str, revision: str, path: str) -> None:
        repo = self._repo(repo_id)
        found = repo and self._revision(repo, revision)
        if not found:
            return
        blob = found[1].get(path)
        if blob is None:
            return self._error(404, f"Entry not found: {path}", "EntryNotFound")
        entry = blob.entry(path)
        headers = {"X-Repo-Commit": found[0], "ETag": f'"{entry.get("lfs", {}).get("oid") or entry["oid"]}"'}
        if blob.lfs:
            headers |= {"X-Linked-Etag": f'"{entry["lfs"]["oid"]}"', "X-Linked-Size": str(len(blob.data))}
        data = blob.data
        ranged = self.headers.get("Range")
        if ranged and ranged.startswith("bytes="):
            start, _, end = ranged.removeprefix("bytes=").partition("-")
            stop = int(end) + 1 if end else len(data)
            headers["Content-Range"] = f"bytes {int(start)}-{stop - 1}/{len(data)}"
            self._send(206, raw=data[int(start) : stop], headers=headers)
            return
        self._send(200, raw=data, headers=headers)


def _tree_entries(files: dict[str, Blob], folder: str, recursive: bool) -> list[dict] | None:
    """The entries under `folder` ('' the root), as the Hub's tree endpoint lists them."""
    prefix = f"{folder}/" if folder else ""
    under = {p: b for p, b in files.items() if p.startswith(prefix)}
    if folder and not under:
        return None
    entries: dict[str, dict] = {}
    for path, blob in sorted(under.items()):
        rest = path[len(prefix) :].split("/")
        for depth in range(1, len(rest)):
            sub = prefix + "/".join(rest[:depth])
            if recursive or depth == 1:
                entries.setdefault(sub, {"type": "directory", "oid": git_oid(sub.encode()), "size": 0, "path": sub})
        if recursive or len(rest) == 1:
            entries[path] = blob.entry(path)
    return list(entries.values())
