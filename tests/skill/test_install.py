"""`tlx-agent skill install`: copies the skill where an agent reads skills, refuses to clobber a different
copy without --force, and works from a built wheel (the skill ships as package data)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from orchestrator.cli.main import main
from orchestrator.cli.skill import SKILL_NAME, skills_directory, tree_digests
from tests.conftest import PROJECT_ROOT
from tests.skill import SKILL_DIR


def _install(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict]:
    code = main(["skill", "install", *args])
    return code, json.loads(capsys.readouterr().out)


def test_install_copies_the_skill_and_says_where(tmp_path: Path, capsys):
    code, document = _install(capsys, "--dest", str(tmp_path / "skills"))
    target = tmp_path / "skills" / SKILL_NAME
    assert code == 0 and document["status"] == "installed"
    assert document["destination"] == str(target) and document["skill_md"] == str(target / "SKILL.md")
    assert tree_digests(target) == tree_digests(SKILL_DIR)
    assert document["files"] == sorted(tree_digests(SKILL_DIR))

    code, document = _install(capsys, "--dest", str(tmp_path / "skills"))
    assert code == 0 and document["status"] == "unchanged"


def test_a_different_copy_is_refused_without_force_and_replaced_with_it(tmp_path: Path, capsys):
    assert _install(capsys, "--dest", str(tmp_path))[0] == 0
    edited = tmp_path / SKILL_NAME / "SKILL.md"
    edited.write_text(edited.read_text() + "\nlocal note\n")
    (tmp_path / SKILL_NAME / "notes.md").write_text("mine\n")

    code, document = _install(capsys, "--dest", str(tmp_path))
    assert code == 1 and document["success"] is False
    assert "SKILL.md differs" in document["error"] and "notes.md not in this version" in document["error"]
    assert "--force" in document["error"]
    assert edited.read_text().endswith("local note\n"), "a refused install must leave the copy alone"

    code, document = _install(capsys, "--dest", str(tmp_path), "--force")
    assert code == 0 and document["status"] == "replaced"
    assert "SKILL.md differs" in document["replaced_differences"]
    assert tree_digests(tmp_path / SKILL_NAME) == tree_digests(SKILL_DIR)
    assert sorted(p.name for p in tmp_path.iterdir()) == [SKILL_NAME], "no staging folder is left behind"


def test_force_replaces_a_link_without_touching_what_it_points_to(tmp_path: Path, capsys):
    elsewhere = tmp_path / "someone-elses-skill"
    elsewhere.mkdir()
    (elsewhere / "SKILL.md").write_text("---\nname: other\ndescription: other\n---\n")
    skills = tmp_path / "skills"
    skills.mkdir()
    (skills / SKILL_NAME).symlink_to(elsewhere)
    assert _install(capsys, "--dest", str(skills))[0] == 1
    assert _install(capsys, "--dest", str(skills), "--force")[0] == 0
    assert not (skills / SKILL_NAME).is_symlink() and tree_digests(skills / SKILL_NAME) == tree_digests(SKILL_DIR)
    assert (elsewhere / "SKILL.md").read_text().startswith("---\nname: other")


def test_the_default_destinations_are_the_agents_personal_skill_folders(tmp_path: Path, capsys, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("CODEX_HOME", raising=False)
    assert skills_directory("claude") == tmp_path / ".claude" / "skills"
    assert skills_directory("codex") == tmp_path / ".codex" / "skills"
    assert skills_directory("codex", {"CODEX_HOME": str(tmp_path / "ch")}) == tmp_path / "ch" / "skills"

    code, document = _install(capsys)
    assert code == 0 and document["agent"] == "claude"
    assert document["destination"] == str(tmp_path / ".claude" / "skills" / SKILL_NAME)
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex-home"))
    code, document = _install(capsys, "--for", "codex")
    assert code == 0 and document["destination"] == str(tmp_path / "codex-home" / "skills" / SKILL_NAME)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_built_wheel_carries_the_skill_and_installs_it(tmp_path: Path):
    """Build a wheel from a copy of the sources (setuptools' own backend, no network), then install the skill
    with the code from the unpacked wheel only: what a user of an installed package gets."""
    source = tmp_path / "src"
    source.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("orchestrator", "protocol", "sandbox_worker", "skills"):
        shutil.copytree(PROJECT_ROOT / name, source / name, symlinks=True, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copyfile(PROJECT_ROOT / name, source / name)
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-c", f"from setuptools import build_meta; build_meta.build_wheel({str(dist)!r})"],
                   cwd=source, check=True, capture_output=True, timeout=240)
    wheel = next(dist.glob("*.whl"))
    unpacked = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(unpacked)
    shipped = unpacked / "orchestrator" / "cli" / "skill_files" / SKILL_NAME
    assert not (unpacked / "orchestrator" / "cli" / "skill_files").is_symlink()
    assert tree_digests(shipped) == tree_digests(SKILL_DIR)

    env = {**os.environ, "PYTHONPATH": str(unpacked)}
    completed = subprocess.run([sys.executable, "-m", "orchestrator.cli", "skill", "install", "--dest",
                                str(tmp_path / "agent-skills")], capture_output=True, text=True, env=env,
                               cwd=tmp_path, timeout=60, stdin=subprocess.DEVNULL)
    assert completed.returncode == 0, completed.stderr
    document = json.loads(completed.stdout)
    assert document["source"] == str(shipped.resolve())
    assert tree_digests(tmp_path / "agent-skills" / SKILL_NAME) == tree_digests(SKILL_DIR)
