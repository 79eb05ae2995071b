"""Building and running the Docker image without a daemon, with buildah's chroot isolation.

The build reaches package indexes the way pip on this machine does: the host's pip
configuration (its files and its PIP_* environment, as `pip config list` reports them)
becomes one pip.conf mounted at /etc/pip.conf in every RUN step, beside the host's CA
bundle and the local directories that configuration names (file:// indexes, find-links,
constraint files), each mounted read-only at the same path. Nothing of it lands in a layer.
"""

from __future__ import annotations

import configparser
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
ISOLATION = "chroot"


def unavailable() -> str | None:
    """Why the image cannot be built and run here, or None if it can."""
    missing = [tool for tool in ("buildah", "debootstrap") if shutil.which(tool) is None]
    if missing:
        return f"needs {' and '.join(missing)} (Debian packages buildah, debootstrap)"
    if os.geteuid() != 0:
        return "needs root (debootstrap, buildah's storage and mounts)"
    return None


def host_pip_config() -> dict[str, dict[str, str]]:
    """pip's effective configuration here, by section; PIP_* variables win over files, as in pip."""
    listed = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], check=True, capture_output=True, text=True
    ).stdout
    files: dict[str, dict[str, str]] = {}
    env: dict[str, str] = {}
    for line in listed.splitlines():
        name, sep, value = line.partition("=")
        if not sep:
            continue
        section, _, key = name.rpartition(".")
        value = value.strip().strip("'\"")
        if section == ":env:":
            env[key] = value
        else:
            files.setdefault(section, {})[key] = value
    files.setdefault("global", {}).update(env)
    return files


def _local_paths(value: str) -> Iterator[Path]:
    """The local files and directories a pip setting names (an index by its root, beside simple/)."""
    for word in value.split():
        path = Path(word.removeprefix("file://")) if word.startswith(("file://", "/")) else None
        if path is None or not path.exists():
            continue
        yield path.parent if path.name == "simple" else path


def pip_volumes(workdir: Path) -> list[str]:
    """`--volume` arguments that give a build's RUN steps this machine's way to its package indexes."""
    config = host_pip_config()
    config["global"].setdefault("cert", str(CA_BUNDLE))
    parser = configparser.ConfigParser(interpolation=None)
    parser.read_dict(config)
    conf = workdir / "pip.conf"
    with conf.open("w") as out:
        parser.write(out)
    mounts = {Path(str(CA_BUNDLE)), *(p for s in config.values() for v in s.values() for p in _local_paths(v))}
    kept = sorted(p for p in mounts if not any(q != p and q in p.parents for q in mounts))
    return ["--volume", f"{conf}:/etc/pip.conf:ro", *(a for p in kept for a in ("--volume", f"{p}:{p}:ro"))]


def build_command(context: Path, tag: str, base_image: str, volumes: Sequence[str], bake: bool) -> list[str]:
    return [
        "buildah", "bud", "--isolation", ISOLATION, "--format", "docker", "--layers",
        "--build-arg", f"BASE_IMAGE={base_image}", "--build-arg", f"BAKE_ENCODINGS={int(bake)}",
        *volumes, "--tag", tag, "--file", str(context / "Dockerfile"), str(context),
    ]  # fmt: skip


def image_config(image: str) -> dict[str, Any]:
    """The image's Docker config (Cmd, User, WorkingDir, Env, Healthcheck, ...)."""
    out = subprocess.run(["buildah", "inspect", "--type", "image", image], check=True, capture_output=True, text=True)
    config: dict[str, Any] = json.loads(out.stdout)["Docker"]["config"]
    return config


@contextmanager
def working_container(image: str) -> Iterator[tuple[str, Path]]:
    """A container from the image and its root file system mounted on the host; both removed after."""
    name = subprocess.run(["buildah", "from", "--quiet", image], check=True, capture_output=True, text=True)
    container = name.stdout.strip()
    try:
        mount = subprocess.run(["buildah", "mount", container], check=True, capture_output=True, text=True)
        yield container, Path(mount.stdout.strip())
    finally:
        subprocess.run(["buildah", "umount", container], check=False, capture_output=True)
        subprocess.run(["buildah", "rm", container], check=False, capture_output=True)


def descendants(pid: int) -> list[int]:
    """Ids of the processes below pid (for `buildah run`: its helpers and what runs inside)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                status = (entry / "status").read_text()
            except OSError:
                continue
            parent = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("PPid:"))
            children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], list(children.get(pid, []))
    while todo:
        child = todo.pop()
        found.append(child)
        todo.extend(children.get(child, []))
    return found


def chrooted(pid: int) -> bool:
    """Whether the process still runs in a root of its own (a container's, not the host's)."""
    try:
        return os.readlink(f"/proc/{pid}/root") != "/"
    except OSError:
        return False
