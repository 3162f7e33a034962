"""The skill's documents say only true things about this CLI: front matter in the agent-skill format, paths
that exist, modules that import, and `tlx-agent` commands and flags that the real parser accepts."""

from __future__ import annotations

import argparse
import importlib
import json
import re
from pathlib import Path

import pytest

from orchestrator.cli.main import build_parser
from orchestrator.cli.skill import SKILL_NAME, SKILL_SOURCE, tree_digests
from sandbox_worker.harness_kit.ncu_command import ncu_command, ncu_import_command
from tests.conftest import PROJECT_ROOT
from tests.skill import (
    DOCUMENTS,
    NCU_GUIDE,
    SKILL_DIR,
    SKILL_MD,
    commands,
    fenced_blocks,
    front_matter,
    inline_spans,
)

PLACEHOLDERS = {"$KERNEL": "/x/kernel.py", "$BUNDLE": "/x/bundle", "$ARCH": "h200", "$RUN": "/x/run",
                "$OUT": "/x/run/out", "$ENTRY": "vector_add", "$REPO": "/x"}
# Spans naming a harness-kit module by its short name, as harness code imports them.
KIT_MODULES = ("checks", "context", "entry_point", "loader", "profile_kit", "timing")


def _parsers() -> dict[str, argparse.ArgumentParser]:
    """Subcommand (and `skill install`) -> its parser, from the real command line."""
    found: dict[str, argparse.ArgumentParser] = {}

    def walk(parser: argparse.ArgumentParser, prefix: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    found[(prefix + " " + name).strip()] = child
                    walk(child, prefix + " " + name)

    walk(build_parser(), "")
    return found


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {option for action in parser._actions for option in action.option_strings}


TLX_FLAGS = set().union(*(_options(parser) for parser in _parsers().values()))
NCU_FLAGS = {word for level in ("summary", "deep") for word in
             ncu_command(kernel_name="k", level=level, export_path="/x/ncu", target_argv=["python"],
                         extra_metrics=["m"]) if word.startswith("--")} | \
            {word for word in ncu_import_command(report_path="/x/r", metrics=["m"]) if word.startswith("--")}


def test_front_matter_is_the_agent_skill_format():
    header, body = front_matter(SKILL_MD.read_text(encoding="utf-8"))
    fields = dict(line.split(": ", 1) for line in header)
    assert set(fields) == {"name", "description"}, header
    assert fields["name"] == SKILL_NAME == SKILL_DIR.name
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", fields["name"]) and len(fields["name"]) <= 64
    description = fields["description"]
    # One plain YAML scalar on one line: no mapping indicator, no comment, no leading indicator character.
    assert ": " not in description and " #" not in description and description[0] not in "'\"&*!|>%@`{[-?"
    assert 100 <= len(description) <= 1024
    assert "Use this skill when" in description and "tlx-agent" in description
    assert body.lstrip().startswith("# ")


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: path.name)
def test_every_path_named_exists(document: Path):
    """A one-word span with a slash that names a file (an extension) or a folder (a trailing slash) is a path,
    relative to the skill directory or to the repository; spans with placeholders ($OUT, <id>) are not."""
    checked = 0
    for span in inline_spans(document):
        if " " in span or "/" not in span or re.search(r"[$<*~]|^-|^/|^https?:", span):
            continue
        if not (span.endswith("/") or re.search(r"\.[a-z]+$", span)):
            continue
        path = span.rstrip("/")
        assert (SKILL_DIR / path).exists() or (PROJECT_ROOT / path).exists(), f"{document.name} names {span}"
        checked += 1
    assert checked > 0


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: path.name)
def test_every_module_and_function_named_exists(document: Path):
    for span in inline_spans(document):
        name = span.split("(")[0]
        if not re.fullmatch(r"[A-Za-z_][\w.]*\.\w+", name):
            continue
        head = name.split(".")[0]
        if head in KIT_MODULES:
            name = f"sandbox_worker.harness_kit.{name}"
        elif head not in ("orchestrator", "protocol", "sandbox_worker"):
            continue
        parts = name.split(".")
        for split in range(len(parts), 0, -1):
            try:
                target = importlib.import_module(".".join(parts[:split]))
            except ModuleNotFoundError:
                continue
            for attribute in parts[split:]:
                assert hasattr(target, attribute), f"{document.name}: {span} does not exist"
                target = getattr(target, attribute)
            break
        else:
            raise AssertionError(f"{document.name}: {span} names no module")


def test_every_command_parses_and_says_its_exit_code():
    parsers = _parsers()
    shown = [command for document in DOCUMENTS for command in commands(document)]
    assert {command.subcommand for command in shown} >= {"doctor", "init-bundle", "validate", "optimize", "report"}
    for command in shown:
        assert command.expected_exit is not None, f"{command.document.name}:{command.line} has no '# exit N' line"
        argv = [PLACEHOLDERS.get(word, word) for word in command.argv]
        argv = [re.sub(r"\$[A-Z]+", lambda m: PLACEHOLDERS[m.group(0)], word) for word in argv]
        args = build_parser().parse_args(argv)  # raises UsageError on an unknown flag or a bad choice
        assert args.command == command.subcommand and command.subcommand in parsers


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: path.name)
def test_every_flag_in_the_text_exists(document: Path):
    """Flags in prose are tlx-agent's (of the named subcommand when a span starts with `tlx-agent SUB`);
    ncu's own flags only in spans and blocks that run ncu; the replay child's only after its module."""
    parsers = _parsers()
    pieces = inline_spans(document)
    pieces += [" ".join(block.lines) for block in fenced_blocks(document)
               if block.language not in ("bash", "json")]  # bash blocks are parsed whole above
    for text in pieces:
        flags = re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", text)
        if not flags:
            continue
        words = text.split()
        if words[0] in ("git", "hg"):
            continue  # the user's VCS, with its own flags
        if words[0] == "ncu":
            known = NCU_FLAGS
        elif "sandbox_worker.harness_kit.ncu_replay" in text:
            known = {"--spec"}
        elif words[0] == "tlx-agent" and len(words) > 1 and words[1] in parsers:
            known = _options(parsers[words[1]])
        else:
            known = TLX_FLAGS | (NCU_FLAGS if document == NCU_GUIDE else set())
        unknown = sorted(set(flags) - known)
        assert not unknown, f"{document.name}: {text!r} uses flags that do not exist: {unknown}"


def test_the_package_data_glob_covers_every_skill_file():
    """`orchestrator/cli/skill_files` is the link setuptools follows; the glob in pyproject.toml must match every
    file under it, or an installed package would ship part of the skill."""
    assert (PROJECT_ROOT / "orchestrator" / "cli" / "skill_files").is_symlink()
    assert SKILL_DIR.resolve() == SKILL_SOURCE
    # The line in [tool.setuptools.package-data] (read as text: tomllib is not in Python 3.10's library).
    line = re.search(r'^"orchestrator\.cli" = (\[.*\])$', (PROJECT_ROOT / "pyproject.toml").read_text(), re.M)
    assert line is not None, "pyproject.toml has no package-data for orchestrator.cli"
    patterns = json.loads(line.group(1))
    package = PROJECT_ROOT / "orchestrator" / "cli"
    covered = {path.relative_to(package / "skill_files" / SKILL_NAME).as_posix()
               for pattern in patterns for path in package.glob(pattern) if path.is_file()}
    assert covered == set(tree_digests(SKILL_DIR)), "pyproject.toml package-data misses skill files"


def test_the_ncu_block_is_the_command_the_kit_runs():
    block = next(block for block in fenced_blocks(NCU_GUIDE) if block.lines and block.lines[0].startswith("ncu "))
    text = " ".join(line.rstrip("\\").strip() for line in block.lines)
    argv = ncu_command(kernel_name="k", level="summary", export_path="/x/ncu", target_argv=["python"],
                       extra_metrics=["m"])
    shown = [word for word in text.split() if word.startswith("--")]
    assert shown == [word for word in argv if word.startswith("--")]
