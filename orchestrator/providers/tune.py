"""The offline default generator: one launch-configuration change at a time, steered by measurements.

It reads the kernel's tunable literals from the AST (block sizes, tile sizes, `num_warps`, `num_stages`,
grouping constants, `triton.Config` entries), picks the change the measured bottleneck and the run's
history favour, and edits only that literal's span, so a patch is a one-line diff. It never repeats a
configuration, never pushes further a knob direction that regressed or broke the kernel, keeps going in
directions that helped, and says `ProviderExhausted` when nothing untried is left.

One change is coupled: when a bigger block or tile regressed on its own, the next step may grow it
together with `num_warps` (x2 each), keeping the work per warp constant. On the H200 a 64 -> 128 matmul
tile with two warps ran at 0.48x and a single-knob climb stopped there; the pair is what the grid's best
configurations do (docs/tuner.md).
"""

from __future__ import annotations

import ast
import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.providers.base import Proposal, ProposalContext, ProviderExhausted
from orchestrator.providers.contract import validate_proposal
from orchestrator.providers.evidence import (
    classify_bottleneck,
    evidence_terms,
    one_line,
)
from orchestrator.source_digest import normalized_digest
from protocol.results import DecisionStatus, EvaluationStatus, ExperimentRecord

UP, DOWN = 1, -1
MOMENTUM_STRIDE = 2  # values skipped+1 along a direction that already helped

# Legal values per knob kind: powers of two with sensible bounds, stages step by one.
DOMAINS: dict[str, tuple[int, ...]] = {
    "block": tuple(2**exponent for exponent in range(4, 14)),  # 16 .. 8192 (1-D programs)
    "tile": tuple(2**exponent for exponent in range(4, 9)),  # 16 .. 256 (matmul tiles)
    "warps": (1, 2, 4, 8, 16),
    "stages": (1, 2, 3, 4, 5, 6),
    "group": tuple(2**exponent for exponent in range(0, 7)),  # 1 .. 64
}
_TUNABLE_WORDS = ("BLOCK", "TILE", "WARPS", "STAGES", "GROUP")
_TILE_NAME = re.compile(r"(?:BLOCK|TILE)(?:_SIZE)?_[MNK]$")


@dataclass(frozen=True)
class Knob:
    """One tunable integer literal and where it sits (AST line and UTF-8 byte columns)."""

    key: str  # stable across edits: origin, name and ordinal among equal (origin, name) pairs
    name: str
    kind: str
    origin: str  # constant | launch | config
    value: int
    line: int
    col: int
    end_col: int

    @property
    def domain(self) -> tuple[int, ...]:
        return DOMAINS[self.kind]


def _int_literal(node: ast.AST | None) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int and node.lineno == node.end_lineno:
        return node.value
    return None


def _knob_kind(name: str, matmul: bool) -> str | None:
    upper = name.upper()
    if upper == "NUM_WARPS" or "WARPS" in upper:
        return "warps"
    if upper == "NUM_STAGES" or "STAGES" in upper:
        return "stages"
    if not name.isupper() or upper.startswith("NUM_") or not any(word in upper for word in _TUNABLE_WORDS):
        return None
    if "GROUP" in upper:
        return "group"
    return "tile" if matmul or _TILE_NAME.search(upper) else "block"


def _looks_like_matmul(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "dot":
            return True
        name = node.id if isinstance(node, ast.Name) else node.arg if isinstance(node, ast.keyword) else None
        if name and _TILE_NAME.search(name):
            return True
    return False


def _call_name(call: ast.Call) -> str:
    function = call.func
    if isinstance(function, ast.Attribute):
        return function.attr
    if isinstance(function, ast.Name):
        return function.id
    return ""


def find_knobs(source: str) -> list[Knob]:
    """Every tunable literal in source order; an unparsable source has none."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    matmul = _looks_like_matmul(tree)
    loaded = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}
    found: list[tuple[str, str, ast.Constant]] = []  # (origin, name, literal)

    for statement in tree.body:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            target, value = statement.targets[0], statement.value
        elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
            target, value = statement.target, statement.value
        else:
            continue
        if isinstance(target, ast.Name) and target.id.isupper() and target.id in loaded and _int_literal(value) is not None:
            found.append(("constant", target.id, value))  # type: ignore[arg-type]

    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        is_launch = isinstance(node.func, ast.Subscript)  # kernel[grid](...)
        is_config = _call_name(node) == "Config"
        for keyword in node.keywords:
            if keyword.arg is None or _int_literal(keyword.value) is None:
                continue
            if keyword.arg in ("num_warps", "num_stages") or (is_launch and keyword.arg.isupper()):
                found.append(("config" if is_config else "launch", keyword.arg, keyword.value))  # type: ignore[arg-type]
        if is_config and node.args and isinstance(node.args[0], ast.Dict):
            for key, value in zip(node.args[0].keys, node.args[0].values, strict=True):
                if isinstance(key, ast.Constant) and isinstance(key.value, str) and _int_literal(value) is not None:
                    found.append(("config", key.value, value))  # type: ignore[arg-type]

    found.sort(key=lambda item: (item[2].lineno, item[2].col_offset))
    knobs: list[Knob] = []
    ordinals: dict[tuple[str, str], int] = {}
    for origin, name, literal in found:
        kind = _knob_kind(name, matmul)
        if kind is None:
            continue
        ordinal = ordinals.get((origin, name), 0)
        ordinals[(origin, name)] = ordinal + 1
        knobs.append(
            Knob(
                key=f"{origin}:{name}#{ordinal}",
                name=name,
                kind=kind,
                origin=origin,
                value=literal.value,
                line=literal.lineno,
                col=literal.col_offset,
                end_col=literal.end_col_offset,  # type: ignore[arg-type]
            )
        )
    return knobs


def apply_knob(source: str, knob: Knob, value: int) -> str:
    """Replace just the literal's span (AST columns are UTF-8 byte offsets), leaving every other byte alone."""
    lines = source.splitlines(keepends=True)
    encoded = lines[knob.line - 1].encode("utf-8")
    lines[knob.line - 1] = (encoded[: knob.col] + str(value).encode() + encoded[knob.end_col :]).decode("utf-8")
    return "".join(lines)


def apply_knobs(source: str, values_by_key: dict[str, int]) -> str:
    """Set several knobs (by key); each edit re-finds its knob, since an earlier one can move its columns."""
    for key, value in values_by_key.items():
        source = apply_knob(source, next(k for k in find_knobs(source) if k.key == key), value)
    return source


def knob_configuration(knobs: Iterable[Knob]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted((knob.key, knob.value) for knob in knobs))


def next_value(knob: Knob, direction: int, current: int) -> int | None:
    """The next legal value strictly beyond `current` in `direction`, or None at the bound."""
    beyond = [v for v in knob.domain if (v > current if direction == UP else v < current)]
    if not beyond:
        return None
    return min(beyond) if direction == UP else max(beyond)


# ---------------------------------------------------------------------------------------------------------
# Evidence -> preference. Weights per bottleneck class for (kind, direction); unlisted pairs weigh 0.1.

_PREFERENCES: dict[str, dict[tuple[str, int], float]] = {
    "unknown": {("block", UP): 3, ("tile", UP): 2, ("warps", UP): 1, ("stages", UP): 1, ("group", UP): 0.5,
                ("block", DOWN): 0.6, ("tile", DOWN): 0.5, ("warps", DOWN): 0.5, ("stages", DOWN): 0.3},
    "launch": {("block", UP): 3, ("tile", UP): 2, ("warps", DOWN): 1.5, ("stages", DOWN): 1, ("warps", UP): 0.5},
    "memory": {("block", UP): 3, ("stages", UP): 2, ("warps", UP): 2, ("tile", UP): 1.5, ("group", UP): 1},
    "compute": {("tile", UP): 3, ("warps", UP): 2, ("stages", UP): 1.5, ("group", UP): 1, ("block", UP): 1},
    "occupancy": {("tile", DOWN): 3, ("block", DOWN): 2.5, ("stages", DOWN): 2, ("warps", UP): 1},
    "spill": {("tile", DOWN): 3, ("block", DOWN): 3, ("stages", DOWN): 2, ("warps", UP): 2},
    # Low SM and memory use: serialization or too little work in flight. Measured on the H200, that is what
    # vector_add with 64-element blocks looks like (SM 25 %, DRAM 25 %), and the cure was more work per
    # program, not more programs: BLOCK_SIZE 64 -> 32 ran at 0.505x, 64 -> 1024 at 3.1x.
    "synchronization": {("block", UP): 2.5, ("tile", UP): 2, ("stages", UP): 1.5, ("warps", UP): 1.5,
                        ("group", UP): 1, ("block", DOWN): 0.5, ("tile", DOWN): 0.5},
}

_RATIONALE: dict[tuple[str, int], tuple[str, str]] = {
    # (kind, direction): (why, expected effect)
    ("block", UP): ("halves the number of programs, cutting per-program overhead",
                    "fewer, larger programs: lower launch and scheduling cost, longer memory bursts"),
    ("block", DOWN): ("doubles the number of programs for more parallelism and fewer registers per program",
                      "more programs in flight and lower register pressure per program"),
    ("tile", UP): ("raises data reuse per loaded tile",
                   "fewer global loads per output element and higher arithmetic intensity"),
    ("tile", DOWN): ("lowers registers and shared memory per program",
                     "more resident programs (occupancy) and fewer spills"),
    ("warps", UP): ("spreads each program over more warps to hide latency",
                    "more warps in flight per program, better latency hiding"),
    ("warps", DOWN): ("gives each warp more work and lowers synchronization per program",
                      "less intra-program synchronization and scheduling overhead"),
    ("stages", UP): ("deepens software pipelining to overlap loads with compute",
                     "memory latency hidden behind compute"),
    ("stages", DOWN): ("frees shared memory and registers held by pipeline buffers",
                       "higher occupancy and fewer spills"),
    ("group", UP): ("groups more tiles per program column for L2 reuse",
                    "higher L2 hit rate on shared operand tiles"),
    ("group", DOWN): ("shrinks tile groups so more columns run concurrently",
                      "better load balance across SMs"),
}

_RISK: dict[tuple[str, int], str] = {
    ("block", UP): "more registers per program may lower occupancy or spill; small cases get fewer programs than SMs",
    ("block", DOWN): "more programs raise launch and scheduling overhead",
    ("tile", UP): "more registers and shared memory may spill or not fit, lowering occupancy",
    ("tile", DOWN): "less data reuse raises global memory traffic",
    ("warps", UP): "more warps may raise register pressure and synchronization cost",
    ("warps", DOWN): "fewer warps may expose memory latency",
    ("stages", UP): "more shared memory per program may lower occupancy or exceed the limit",
    ("stages", DOWN): "shallower pipelining may expose memory latency",
    ("group", UP): "larger groups can unbalance work across SMs",
    ("group", DOWN): "smaller groups lower L2 reuse",
}


@dataclass
class _Attempt:
    """A configuration this provider proposed, and what the run later decided about it."""

    knob_key: str
    knob_name: str
    direction: int
    old: int
    new: int
    configuration: tuple[tuple[str, int], ...]
    round_index: int
    digests: frozenset[str]  # raw and normalized sha256 of the proposed source, to match history records
    paired: tuple[str, str, int, int] | None = None  # (warps knob key, name, old, new) moved with this knob

    @property
    def side(self) -> tuple[str, int]:
        """What the run learns about: a knob direction, or the (knob + warps) pair going up together."""
        return (pair_key(self.knob_key, self.paired[0]) if self.paired else self.knob_key, self.direction)

    def label(self) -> str:
        moved = f"{self.knob_name} {self.old}->{self.new}"
        return moved + (f" with {self.paired[1]} {self.paired[2]}->{self.paired[3]}" if self.paired else "")


@dataclass
class _Lessons:
    tried: set[tuple[tuple[str, int], ...]] = field(default_factory=set)
    # (knob key, direction) -> first value that regressed or failed; values at or beyond it are off limits
    blocked: dict[tuple[str, int], int] = field(default_factory=dict)
    # (knob key, direction) -> best aggregate speedup seen going that way
    helped: dict[tuple[str, int], float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    pending_knobs: set[str] = field(default_factory=set)


def pair_key(knob_key: str, warps_key: str) -> str:
    return f"{knob_key}&{warps_key}"


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _excluded(context: ProposalContext, source: str) -> bool:
    """The run (or a prior run) has already measured or excluded this exact or normalized source."""
    return bool({_sha256(source), normalized_digest(source)} & context.excluded_digests)


def _outcome(record: ExperimentRecord) -> str:
    """helped | regressed | broken | neutral | unknown, from the run's own decision and numbers."""
    if record.decision is None:
        return "unknown"
    if record.decision.status is DecisionStatus.PROMOTED:
        return "helped"
    candidate = record.candidate_evaluation
    if record.decision.status is DecisionStatus.FAILED or (
        candidate is not None and candidate.status is not EvaluationStatus.OK
    ):
        return "broken"
    if record.decision.status is DecisionStatus.DUPLICATE:
        return "neutral"
    speedup = record.aggregate_speedup
    if speedup is not None and speedup < 1.0:
        return "regressed"
    return "neutral"


@dataclass(frozen=True)
class _Move:
    score: float
    order: int  # knob position in the source: the deterministic tie-breaker
    knob: Knob
    direction: int
    value: int
    source: str
    configuration: tuple[tuple[str, int], ...]
    paired: tuple[Knob, int] | None = None  # the warps knob and its new value, moved together with `knob`


class TuneProvider:
    """Evidence-driven single-knob tuning; proposals are sequential so each sees the last result."""

    name = "tune"
    concurrent = False

    def __init__(self) -> None:
        self._attempts: list[_Attempt] = []

    def _attempt_for(self, record: ExperimentRecord) -> _Attempt | None:
        digests = {record.normalized_sha256, record.source_sha256} - {""}
        return next((attempt for attempt in self._attempts if attempt.digests & digests), None)

    def _lessons(self, context: ProposalContext) -> _Lessons:
        """What the run's history says about this provider's earlier attempts (and others' sources)."""
        lessons = _Lessons(tried={attempt.configuration for attempt in self._attempts})
        recorded: list[_Attempt] = []
        for record in context.history:
            attempt = self._attempt_for(record)
            if attempt is None:
                configuration = _configuration_from_file(record.source_path)
                if configuration:
                    lessons.tried.add(configuration)
                continue
            recorded.append(attempt)
            side = attempt.side
            outcome = _outcome(record)
            speedup = record.aggregate_speedup
            if outcome in ("regressed", "broken"):
                previous = lessons.blocked.get(side, attempt.new)
                lessons.blocked[side] = min(previous, attempt.new) if attempt.direction == UP else max(previous, attempt.new)
                label = f"{speedup:.3f}x" if speedup is not None and outcome == "regressed" else outcome
                lessons.notes.append(f"{attempt.label()} {label}")
            elif outcome == "helped" or (speedup is not None and speedup > 1.0):
                lessons.helped[side] = max(lessons.helped.get(side, 0.0), speedup or 1.0)
                label = f"{speedup:.3f}x" if speedup is not None else "promoted"
                lessons.notes.append(f"{attempt.label()} helped ({label})")
        pending = [attempt for attempt in self._attempts
                   if attempt.round_index == context.round_index and all(attempt is not done for done in recorded)]
        lessons.pending_knobs = {attempt.knob_key for attempt in pending} | {
            attempt.paired[0] for attempt in pending if attempt.paired}
        return lessons

    def _moves(self, context: ProposalContext, knobs: list[Knob], lessons: _Lessons, bottleneck: str) -> list[_Move]:
        """For each knob and direction one untried, unblocked value; best score first.

        The nearest such value, except along a direction that already paid off: there the tuner skips one
        value (a factor of four for powers of two), so a long climb (block 32 -> 2048) takes half the
        evaluations; when that stride overshoots and regresses, the skipped value is the next proposal.
        """
        preferences = _PREFERENCES.get(bottleneck, _PREFERENCES["unknown"])
        incumbent = dict(knob_configuration(knobs))
        moves = []
        for order, knob in enumerate(knobs):
            for direction in (UP, DOWN):
                side = (knob.key, direction)
                stride = MOMENTUM_STRIDE if side in lessons.helped else 1
                eligible = list(self._eligible(context, knob, direction, incumbent, lessons, limit=stride))
                if not eligible:
                    continue
                value, source, configuration = eligible[-1]
                score = preferences.get((knob.kind, direction), 0.1)
                score += 3.0 if side in lessons.helped else 0.0
                score -= 5.0 if knob.key in lessons.pending_knobs else 0.0  # another slot moves this knob now
                # prefer small steps; a stride earned by success is not penalized
                distance = abs(knob.domain.index(value) - _nearest_index(knob))
                score -= 0.5 * max(0, distance - (stride - 1))
                moves.append(_Move(score, order, knob, direction, value, source, configuration))
        moves.extend(self._paired_moves(context, knobs, lessons, preferences, incumbent))
        return sorted(moves, key=lambda move: (-move.score, move.order, -move.direction))

    @staticmethod
    def _paired_moves(context: ProposalContext, knobs: list[Knob], lessons: _Lessons,
                      preferences: dict[tuple[str, int], float], incumbent: dict[str, int]) -> list[_Move]:
        """A block or tile grown together with num_warps (x2 each), once growing it alone regressed or broke
        the kernel at its next value, or after such a pair helped: a bigger tile needs the warps to compute it."""
        warps = next((knob for knob in knobs if knob.kind == "warps"), None)
        more_warps = next_value(warps, UP, warps.value) if warps is not None else None
        if warps is None or more_warps is None or warps.key in lessons.pending_knobs:
            return []
        moves = []
        for order, knob in enumerate(knobs):
            value = next_value(knob, UP, knob.value) if knob.kind in ("block", "tile") else None
            if value is None or knob.key in lessons.pending_knobs:
                continue
            side = (pair_key(knob.key, warps.key), UP)
            alone_blocked = lessons.blocked.get((knob.key, UP))
            if side not in lessons.helped and (alone_blocked is None or alone_blocked > value):
                continue  # no evidence that this knob needs more warps to grow
            pair_blocked = lessons.blocked.get(side)
            if pair_blocked is not None and value >= pair_blocked:
                continue
            configuration = tuple(sorted({**incumbent, knob.key: value, warps.key: more_warps}.items()))
            if configuration in lessons.tried:
                continue
            source = apply_knobs(context.incumbent_source, {knob.key: value, warps.key: more_warps})
            if _excluded(context, source):
                continue
            score = preferences.get((knob.kind, UP), 0.1) + 1.0 + (3.0 if side in lessons.helped else 0.0)
            moves.append(_Move(score, order, knob, UP, value, source, configuration, paired=(warps, more_warps)))
        return moves

    @staticmethod
    def _eligible(context: ProposalContext, knob: Knob, direction: int, incumbent: dict[str, int],
                  lessons: _Lessons, *, limit: int):
        """Up to `limit` untried, unblocked, not excluded values beyond the knob's value, nearest first."""
        blocked_at = lessons.blocked.get((knob.key, direction))
        value, found = knob.value, 0
        while found < limit and (value := next_value(knob, direction, value)) is not None:
            if blocked_at is not None and (value >= blocked_at if direction == UP else value <= blocked_at):
                return  # this direction regressed or broke the kernel at `blocked_at`
            configuration = tuple(sorted({**incumbent, knob.key: value}.items()))
            if configuration in lessons.tried:
                continue
            source = apply_knob(context.incumbent_source, knob, value)
            if _excluded(context, source):
                continue
            found += 1
            yield value, source, configuration

    async def propose(self, context: ProposalContext) -> Proposal:
        knobs = find_knobs(context.incumbent_source)
        if not knobs:
            raise ProviderExhausted(
                "tune found no tunable knob (BLOCK*/TILE*/GROUP* constants, num_warps, num_stages, triton.Config)"
            )
        lessons = self._lessons(context)
        bottleneck, bottleneck_evidence = classify_bottleneck(context.incumbent_evaluation)
        moves = self._moves(context, knobs, lessons, bottleneck)
        if not moves:
            raise ProviderExhausted(
                f"tune has no untried configuration left for {len(knobs)} knobs "
                f"({', '.join(sorted({k.name for k in knobs}))})"
            )
        best = moves[0]
        metadata = _metadata(best.knob, best.direction, best.value, bottleneck, bottleneck_evidence, lessons.notes,
                             paired=best.paired)
        proposal = validate_proposal(
            best.source, metadata, context.incumbent_source, evidence_terms=evidence_terms(context)
        )
        self._attempts.append(
            _Attempt(
                knob_key=best.knob.key,
                knob_name=best.knob.name,
                direction=best.direction,
                old=best.knob.value,
                new=best.value,
                configuration=best.configuration,
                round_index=context.round_index,
                digests=frozenset({_sha256(best.source), normalized_digest(best.source)}),
                paired=(best.paired[0].key, best.paired[0].name, best.paired[0].value, best.paired[1])
                if best.paired else None,
            )
        )
        return proposal

    async def aclose(self) -> None:
        return None


def _nearest_index(knob: Knob) -> int:
    """Index of the domain value closest to the knob's current value (for distance penalties)."""
    return min(range(len(knob.domain)), key=lambda index: abs(knob.domain[index] - knob.value))


def _configuration_from_file(path: str) -> tuple[tuple[str, int], ...]:
    """Knob values of an experiment this provider did not propose (e.g. a replayed one), if readable."""
    if not path:
        return ()
    try:
        candidate = Path(path)
        if not candidate.is_file() or candidate.stat().st_size > 4 * 1024 * 1024:
            return ()
        return knob_configuration(find_knobs(candidate.read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError):
        return ()


def _metadata(
    knob: Knob, direction: int, value: int, bottleneck: str, bottleneck_evidence: str, notes: list[str],
    paired: tuple[Knob, int] | None = None,
) -> dict[str, str]:
    if paired is not None:
        return _paired_metadata(knob, value, paired, bottleneck, bottleneck_evidence, notes)
    why, effect = _RATIONALE[(knob.kind, direction)]
    verb = "Raising" if direction == UP else "Lowering"
    where = f"{knob.origin} at line {knob.line}"
    history = f"; earlier: {', '.join(notes[-3:])}" if notes else ""
    bound = f" (the incumbent is {bottleneck}-bound)" if bottleneck != "unknown" else ""
    return {
        "hypothesis": one_line(f"{verb} {knob.name} from {knob.value} to {value} {why}{bound}", 240),
        "evidence": one_line(
            f"{bottleneck}: {bottleneck_evidence}; {knob.name}={knob.value} at line {knob.line}{history}", 240
        ),
        "change": one_line(f"{knob.name} {knob.value} -> {value} ({where}); nothing else changes", 240),
        "expected_effect": one_line(f"{effect}; lower median latency on the dominant case", 240),
        "risk": one_line(_RISK[(knob.kind, direction)], 240),
    }


def _paired_metadata(knob: Knob, value: int, paired: tuple[Knob, int], bottleneck: str, bottleneck_evidence: str,
                     notes: list[str]) -> dict[str, str]:
    warps, more_warps = paired
    history = f"; earlier: {', '.join(notes[-3:])}" if notes else ""
    return {
        "hypothesis": one_line(
            f"Raising {knob.name} from {knob.value} to {value} together with {warps.name} from {warps.value} to "
            f"{more_warps} keeps the work per warp constant: the larger {knob.kind} alone lacked the warps to "
            "compute it", 240),
        "evidence": one_line(
            f"{bottleneck}: {bottleneck_evidence}; {knob.name}={knob.value}, {warps.name}={warps.value}{history}", 240),
        "change": one_line(f"{knob.name} {knob.value} -> {value} and {warps.name} {warps.value} -> {more_warps} "
                           f"(lines {knob.line} and {warps.line}); nothing else changes", 240),
        "expected_effect": one_line(
            f"{_RATIONALE[(knob.kind, UP)][1]} without fewer warps per element; lower median latency on the "
            "dominant case", 240),
        "risk": one_line(f"{_RISK[(knob.kind, UP)]}; more warps also raise per-program synchronization", 240),
    }
