"""The command line as people type it: help for every flag with its default, no abbreviations, --version, errors
that name the flag, and README.md's flag table generated from the parser."""

from __future__ import annotations

import argparse
import json
import sys

import pytest

from orchestrator.cli import flag_table
from orchestrator.cli.main import THIS_PYTHON, build_parser, main, package_version
from protocol.bundle import Budget
from tests.conftest import PROJECT_ROOT, VECTOR_ADD, run_cli


def every_parser() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    return {"tlx-agent": parser, **flag_table.subcommand_parsers(parser)}


def shown(value: object) -> str:
    """How help text states a default."""
    if value is True:
        return "on"
    if value == sys.executable:
        return THIS_PYTHON
    return f"{value:g}" if isinstance(value, float) else str(value)


def flag_help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    return flag_table._help(parser, action)


@pytest.mark.parametrize("name", sorted(every_parser()))
def test_every_flag_has_help_text(name):
    parser = every_parser()[name]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            continue
        assert action.help and action.help.strip(), f"{name} {action.option_strings or action.dest}: no help text"


@pytest.mark.parametrize("name", sorted(every_parser()))
def test_every_default_is_stated_in_the_help(name):
    """A flag with a default says it; switches that share a destination say it once between them; the budget
    flags (no argparse default: budget.json and target.json may set them) state the Budget model's."""
    parser = every_parser()[name]
    by_dest: dict[str, list[argparse.Action]] = {}
    for action in parser._actions:
        if action.option_strings and not isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            by_dest.setdefault(action.dest, []).append(action)
    budget = Budget()
    for dest, actions in by_dest.items():
        text = " ".join(flag_help(parser, action) for action in actions)
        default = actions[0].default
        if default is None and dest in Budget.model_fields and name in ("optimize", "validate"):
            default = getattr(budget, dest)
        if default is None or default is False:
            continue
        assert "default" in text and shown(default) in text, f"{name} {actions[0].option_strings}: {text!r}"


def test_abbreviated_flags_are_refused(capsys):
    assert main(["optimize", "--max-round", "3"]) == 1
    captured = capsys.readouterr()
    assert "unrecognized arguments: --max-round 3" in captured.err
    assert json.loads(captured.out)["success"] is False
    assert main(["validate", "--kernel", "k.py", "--harness", "h.py", "--cases", "c.json", "--target", "t.json",
                 "--kern", "k.py"]) == 1
    assert "unrecognized arguments: --kern k.py" in capsys.readouterr().err
    assert all(not parser.allow_abbrev for parser in every_parser().values())


def test_version():
    run = run_cli("--version", timeout=60)
    assert run.returncode == 0 and run.stdout == f"tlx-agent {package_version()}\n"
    assert package_version() == "0.1.0"


@pytest.mark.parametrize("argv, message", [
    (["--max-total-seconds", "-5"], "--max-total-seconds -5: input should be greater than 0 (see --help)"),
    (["--max-rounds", "0"], "--max-rounds 0: input should be greater than 0 (see --help)"),
    (["--max-case-regression", "2"], "--max-case-regression 2: input should be less than or equal to 1 (see --help)"),
    (["--confidence", "1.5"], "argument --confidence: 1.5 is not between 0.5 and 1 (exclusive), e.g. 0.99"),
    (["--data-limit-gib", "-1"], "argument --data-limit-gib: -1 is not a positive number"),
])
def test_a_bad_value_names_the_flag_before_anything_runs(tmp_path, capsys, argv, message):
    output = tmp_path / "out"
    code = main(["optimize", "--kernel", str(VECTOR_ADD / "kernel.py"), "--harness", str(VECTOR_ADD / "harness.py"),
                 "--cases", str(VECTOR_ADD / "cases.json"), "--target", str(VECTOR_ADD / "target.json"),
                 "--output-dir", str(output), *argv])
    captured = capsys.readouterr()
    assert code == 1
    assert captured.err.count("\n") == 1 and message in captured.err
    assert message in json.loads(captured.out)["error"] and not output.exists()


def test_the_readme_flag_table_is_generated_from_the_parser():
    readme = PROJECT_ROOT / "README.md"
    assert flag_table.main([str(readme), "--check"]) == 0, \
        "README.md's flag table is out of date: run `python -m orchestrator.cli.flag_table README.md`"
    text = readme.read_text()
    for flag, _help in flag_table.flag_rows(every_parser()["optimize"]):
        assert flag in text
