"""Which repository holds the kernel: ``--vcs auto|git|hg`` resolved from the kernel's absolute path."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from orchestrator.vcs.errors import VcsError
from orchestrator.vcs.git_session import git_toplevel
from orchestrator.vcs.hg_session import hg_root

VcsName = Literal["git", "hg"]
VCS_LABELS = {"git": "git", "hg": "Mercurial"}


@dataclass(frozen=True)
class Repository:
    vcs: VcsName
    root: Path


def kernel_location(kernel_path: Path) -> Path:
    """Absolute path with the directory's symlinks resolved (VCS roots are reported that way), file name kept."""
    absolute = Path(os.path.abspath(kernel_path))
    return absolute.parent.resolve() / absolute.name


def detect_repository(kernel_path: Path, requested: Literal["auto", "git", "hg"]) -> Repository | None:
    """The repository that commits go to; None only for ``auto`` with the kernel outside every repository.

    With both a git and a Mercurial root above the kernel, the deeper one wins; equal depth is ambiguous.
    """
    if requested not in ("auto", "git", "hg"):
        raise VcsError(f"unknown VCS {requested!r}; pass --vcs auto, --vcs git or --vcs hg")
    kernel = kernel_location(kernel_path)
    if not kernel.parent.is_dir():
        raise VcsError(f"the kernel's directory {kernel.parent} does not exist; pass an existing --kernel")
    wanted: tuple[VcsName, ...] = ("git", "hg") if requested == "auto" else (requested,)
    roots = {vcs: root for vcs in wanted if (root := _root(vcs, kernel.parent, required=requested != "auto"))}
    if requested != "auto":
        if requested not in roots:
            raise VcsError(
                f"--vcs {requested} was passed but {kernel} is not inside a {VCS_LABELS[requested]} "
                "repository; pass --vcs auto or the VCS that holds it"
            )
        return Repository(requested, roots[requested])
    if not roots:
        return None
    deepest = max(len(root.parts) for root in roots.values())
    candidates = [vcs for vcs, root in roots.items() if len(root.parts) == deepest]
    if len(candidates) > 1:
        raise VcsError(
            f"ambiguous VCS repository: {roots['git']} is both a git and a Mercurial root; "
            "pass --vcs git or --vcs hg"
        )
    return Repository(candidates[0], roots[candidates[0]])


def _root(vcs: VcsName, directory: Path, *, required: bool) -> Path | None:
    """The VCS root above ``directory``; a missing tool matters only when that VCS is asked for or present."""
    try:
        return git_toplevel(directory) if vcs == "git" else hg_root(directory)
    except VcsError:
        marker = ".git" if vcs == "git" else ".hg"
        if required or any((parent / marker).exists() for parent in (directory, *directory.parents)):
            raise
        return None
