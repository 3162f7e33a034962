"""A job's `options` as optimize's command-line flags, checked against optimize's own argparse definition.

The caller hands in the function that defines optimize's arguments (orchestrator/cli/main.py passes
`_add_optimize_arguments`), so there is no second, hand-kept list of options to drift, and no import cycle
between the batch and the command line. An option is a long flag's name without dashes, `-` written `_`.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

OptimizeArguments = Callable[[argparse.ArgumentParser], None]
# Set by the batch from a job's own fields, never through `options`.
BATCH_OWNED = frozenset({"kernel", "harness", "cases", "target", "bundle_lock", "output_dir"})
# optimize options a job cannot take, and why.
REFUSED = {"resume": "a job starts a fresh run; `tlx-agent batch --resume` continues a batch"}


class OptionError(ValueError):
    """An option optimize does not have, or a value its flag cannot take; the message names the option."""


@dataclass(frozen=True)
class Flag:
    name: str  # the option's name: "max_total_seconds"
    flag: str  # "--max-total-seconds"
    takes_value: bool
    is_path: bool
    opposite: str | None  # for a switch: the flag that sets the same destination the other way


class _CheckingParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise OptionError(message)


def optimize_parser(define: OptimizeArguments) -> argparse.ArgumentParser:
    parser = _CheckingParser(prog="tlx-agent optimize", add_help=False)
    define(parser)
    return parser


def optimize_flags(parser: argparse.ArgumentParser) -> dict[str, Flag]:
    """Every long flag of optimize by option name."""
    actions = [a for a in parser._actions if any(s.startswith("--") for s in a.option_strings)]
    flags: dict[str, Flag] = {}
    for action in actions:
        flag = next(s for s in action.option_strings if s.startswith("--"))
        takes_value = action.nargs != 0
        opposite = None
        if not takes_value:  # --profile / --no-profile: the other switch with the same dest
            opposite = next((next(s for s in other.option_strings if s.startswith("--")) for other in actions
                             if other is not action and other.dest == action.dest and other.nargs == 0), None)
        flags[flag[2:].replace("-", "_")] = Flag(flag[2:].replace("-", "_"), flag, takes_value,
                                                 action.type is Path, opposite)
    return flags


def option_argv(options: Mapping[str, Any], flags: Mapping[str, Flag], base_dir: Path) -> list[str]:
    """The flags for `options`: a switch takes true (its flag) or false (its opposite, or nothing); a valued
    flag takes a string or number; a path is relative to `base_dir` (the manifest's folder)."""
    argv: list[str] = []
    for name, value in options.items():
        if name in BATCH_OWNED:
            raise OptionError(f"option {name!r} is set by the batch (a job field or --output-dir), not in options")
        if name in REFUSED:
            raise OptionError(f"option {name!r} is refused: {REFUSED[name]}")
        flag = flags.get(name)
        if flag is None:
            raise OptionError(f"option {name!r} is not an optimize option (see `tlx-agent optimize --help`)")
        if not flag.takes_value:
            if not isinstance(value, bool):
                raise OptionError(f"option {name!r} is a switch: give true or false, not {value!r}")
            chosen = flag.flag if value else flag.opposite
            argv += [chosen] if chosen else []
            continue
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise OptionError(f"option {name!r} takes a string or a number, not {value!r}")
        text = str(value)
        if flag.is_path:
            text = str(base_dir / Path(text).expanduser())  # an absolute path stays as it is
        argv += [flag.flag, text]
    return argv


def check_argv(parser: argparse.ArgumentParser, argv: list[str]) -> None:
    """Parse a job's optimize argv with optimize's real parser: a bad choice or number fails here, by name,
    before any job runs."""
    parser.parse_args(argv)
