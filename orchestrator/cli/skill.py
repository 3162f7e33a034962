"""`tlx-agent skill install`: copy the agent skill to where a coding agent looks for skills.

The skill is the directory `skills/tlx-kernel-optimization/` of this repository. It reaches an installed
package as package data of `orchestrator.cli`: `orchestrator/cli/skill_files` is a link to `../../skills`,
which setuptools follows, so a wheel or an sdist carries real copies of the files (pyproject.toml,
`[tool.setuptools.package-data]`) and an editable install reads the repository's own. Either way this
module reads one path, `SKILL_SOURCE`.

Destinations: `--dest DIR`, else by `--for`: Claude Code reads personal skills from `~/.claude/skills/<name>/`;
Codex from `$CODEX_HOME/skills/<name>/` (`~/.codex/skills` when CODEX_HOME is unset; newer Codex releases
also read `~/.agents/skills`, which `--dest ~/.agents/skills` covers). The skill lands in `DIR/<name>/`.
An identical copy there is left alone; a different one (an older version, or an edited copy) is refused
unless `--force`, because it may hold someone's edits. stdout: one JSON document saying where it went.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from orchestrator.cli.output import emit, fail
from protocol.commands import SkillInstallOutput
from protocol.outcome import ExitCode

SKILL_NAME = "tlx-kernel-optimization"
SKILL_SOURCE = (Path(__file__).parent / "skill_files" / SKILL_NAME).resolve()
AGENTS = ("claude", "codex")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="skill_command", metavar="{install}")
    actions.required = True
    install = actions.add_parser("install", help=f"copy the {SKILL_NAME} skill into an agent's skills directory")
    install.add_argument("--dest", type=Path,
                         help=f"skills directory to install into (the skill goes to DEST/{SKILL_NAME}/); "
                              "default: the --for agent's personal skills directory")
    install.add_argument("--for", dest="agent", choices=AGENTS, default="claude",
                         help="whose skills directory (default: %(default)s): claude ~/.claude/skills; codex "
                              "$CODEX_HOME/skills, ~/.codex/skills without CODEX_HOME")
    install.add_argument("--force", action="store_true", help="replace a different existing copy")
    install.add_argument("--debug", action="store_true", help="tracebacks for internal errors")


def skills_directory(agent: str, environ: dict[str, str] | None = None) -> Path:
    """The personal skills directory `agent` reads (not created here)."""
    env = os.environ if environ is None else environ
    if agent == "claude":
        return Path("~/.claude/skills").expanduser()
    if agent == "codex":
        return Path(env["CODEX_HOME"]).expanduser() / "skills" if env.get("CODEX_HOME") \
            else Path("~/.codex/skills").expanduser()
    raise ValueError(f"unknown agent {agent!r}; expected one of {AGENTS}")


def tree_digests(root: Path) -> dict[str, str]:
    """Relative path -> sha256 of every file under `root` (links followed), for comparing two copies."""
    digests = {}
    for path in sorted(root.rglob("*")):
        if path.is_file():
            digests[path.relative_to(root).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    return digests


def _differences(installed: dict[str, str], shipped: dict[str, str]) -> list[str]:
    changed = [name for name in shipped if name in installed and installed[name] != shipped[name]]
    missing = [name for name in shipped if name not in installed]
    extra = [name for name in installed if name not in shipped]
    return [f"{name} differs" for name in changed] + [f"{name} missing" for name in missing] + \
        [f"{name} not in this version" for name in extra]


def _replace(target: Path, source: Path) -> None:
    """Copy `source` next to `target`, then swap it in, so a failed copy leaves the old skill whole."""
    staging = Path(tempfile.mkdtemp(prefix=f".{SKILL_NAME}-", dir=target.parent))
    try:
        fresh = staging / SKILL_NAME
        shutil.copytree(source, fresh)
        if target.is_symlink() or target.is_file():
            target.unlink()  # a link someone made to another copy: remove the link, never what it points to
        elif target.exists():
            shutil.rmtree(target)
        fresh.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def install(source: Path, skills_dir: Path, *, force: bool) -> tuple[str, Path, list[str]]:
    """Install `source` as `skills_dir/<name>`; returns (status, destination, differences it replaced).

    status is `installed`, `unchanged` or `replaced`; a different copy without `force` raises FileExistsError
    naming what differs.
    """
    skills_dir = skills_dir.expanduser().resolve()
    target = skills_dir / SKILL_NAME
    shipped = tree_digests(source)
    if target.exists() or target.is_symlink():
        installed = tree_digests(target) if target.is_dir() else {}
        differences = _differences(installed, shipped)
        if not differences:
            return "unchanged", target, []
        if not force:
            shown = "; ".join(differences[:5]) + (f"; and {len(differences) - 5} more" if len(differences) > 5 else "")
            raise FileExistsError(f"{target} holds a different copy of the skill ({shown}); pass --force to "
                                  "replace it, or --dest another directory")
        _replace(target, source)
        return "replaced", target, differences
    skills_dir.mkdir(parents=True, exist_ok=True)
    _replace(target, source)
    return "installed", target, []


def skill_main(args: argparse.Namespace) -> int:
    if not (SKILL_SOURCE / "SKILL.md").is_file():
        return fail(f"the skill files are missing from this installation ({SKILL_SOURCE}); reinstall tlx-agent")
    skills_dir = args.dest if args.dest is not None else skills_directory(args.agent)
    try:
        status, target, replaced = install(SKILL_SOURCE, skills_dir, force=args.force)
    except FileExistsError as exc:
        return fail(str(exc))
    except OSError as exc:
        return fail(f"cannot install the skill into {skills_dir}: {exc}")
    emit(SkillInstallOutput(
        success=True, exit_code=ExitCode.OK, skill=SKILL_NAME, status=status,
        agent=None if args.dest is not None else args.agent, source=str(SKILL_SOURCE), destination=str(target),
        skill_md=str(target / "SKILL.md"), files=sorted(tree_digests(target)), replaced_differences=replaced,
    ).model_dump(mode="json"))
    return ExitCode.OK


__all__ = ["SKILL_NAME", "SKILL_SOURCE", "add_arguments", "install", "skill_main", "skills_directory"]
