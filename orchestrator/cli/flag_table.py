"""README.md's flag tables, generated from the parsers themselves, so the README cannot drift from `--help`.

README.md holds, per subcommand, a block between `<!-- flags:NAME -->` and `<!-- /flags:NAME -->`; this module
writes each block from the subcommand's argparse definition (every long flag, its value, its help text with the
default in it). `python -m orchestrator.cli.flag_table README.md` rewrites the blocks; `--check` only says
whether they are current (tests/cli/test_parser.py runs the check).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

TABLES = ("optimize",)  # the subcommands whose flags README.md tabulates


def subcommand_parsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """Every subcommand's parser by name, nested ones as "skill install"."""
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                found[name] = child
                found.update({f"{name} {sub}": grandchild for sub, grandchild in subcommand_parsers(child).items()})
    return found


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """The help text as `--help` prints it (`%(default)s` and `%%` expanded)."""
    formatter = parser._get_formatter()
    return " ".join(formatter._expand_help(action).split())


def flag_rows(parser: argparse.ArgumentParser) -> list[tuple[str, str]]:
    """(flag with its value, help) for every long flag, in definition order."""
    rows = []
    for action in parser._actions:
        longs = [option for option in action.option_strings if option.startswith("--")]
        if not longs or isinstance(action, argparse._HelpAction):
            continue
        value = "" if action.nargs == 0 else " " + (action.metavar or (
            "{" + ",".join(action.choices) + "}" if action.choices else action.dest.upper()))
        rows.append((f"`{longs[0]}{value}`", _help(parser, action)))
    return rows


def markdown_table(parser: argparse.ArgumentParser) -> str:
    lines = ["| flag | what it does (default) |", "| --- | --- |"]
    lines += [f"| {_cell(flag)} | {_cell(text)} |" for flag, text in flag_rows(parser)]
    return "\n".join(lines)


def _block(name: str) -> re.Pattern[str]:
    return re.compile(rf"(<!-- flags:{re.escape(name)} -->\n)(?:.*?\n)?(<!-- /flags:{re.escape(name)} -->)", re.S)


def synced(text: str, parser: argparse.ArgumentParser) -> str:
    """`text` with every table block rewritten; a block missing from the text is an error naming it."""
    parsers = subcommand_parsers(parser)
    for name in TABLES:
        pattern = _block(name)
        if not pattern.search(text):
            raise ValueError(f"no '<!-- flags:{name} -->' ... '<!-- /flags:{name} -->' block to fill")
        table = markdown_table(parsers[name])
        text = pattern.sub(lambda match, table=table: match.group(1) + table + "\n" + match.group(2), text)
    return text


def main(argv: list[str] | None = None) -> int:
    from orchestrator.cli.main import build_parser

    args = argparse.ArgumentParser(description=__doc__, allow_abbrev=False)
    args.add_argument("readme", type=Path, help="the file whose flag blocks to rewrite (README.md)")
    args.add_argument("--check", action="store_true", help="exit 1 when a block is out of date; write nothing")
    options = args.parse_args(argv)
    text = options.readme.read_text(encoding="utf-8")
    new = synced(text, build_parser())
    if options.check:
        if new != text:
            sys.stderr.write(f"{options.readme}: flag tables out of date; run python -m orchestrator.cli.flag_table "
                             f"{options.readme}\n")
            return 1
        return 0
    if new != text:
        options.readme.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
