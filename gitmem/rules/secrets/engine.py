"""The scanning engine: one pass finds trigger words, then only the rules they wake look nearby.

Running ~150 regular expressions over a 100 KB note would cost tens of milliseconds. Instead every
rule names short lower-case *triggers* (``ghp_``, ``password``, ``-----begin``); one Aho-Corasick pass
(ahocorasick-rs, a DFA in Rust) finds them all in a lower-cased ASCII copy of the note; a rule may
also require its *anchor* pattern to match at the trigger (``password`` only where a value can
follow); each hit runs only its rules, and only on a bounded window around the hit. Every rule's
pattern is built from bounded repeats, so the cost stays linear in the note's length whatever the
note holds. Without ahocorasick-rs a regular expression built as a trie of the triggers does the
first pass, slower.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

try:
    import ahocorasick_rs
except ImportError:  # pragma: no cover - the trie regex below does the same, slower
    ahocorasick_rs = None  # type: ignore[assignment]

# (text, hit start, hit end, floor) -> (offset of a secret found near the hit or None, next floor).
# The floor is where the rule's previous search left off: a rule woken many times in a row (a note
# of "password=" repeated) does not search the same characters again and again.
Locator = Callable[[str, int, int, int], "tuple[int | None, int]"]


# (text, floor) -> offsets of every secret the rule finds from the floor on: one linear pass.
Sweeper = Callable[[str, int], Iterator[int]]
# A rule whose windows have added up to more characters than the note holds (hostile input, or a
# note of hundreds of "login") stops searching windows and sweeps the rest of the note once instead:
# either way each character is searched at most about twice, and padding with triggers cannot hide a
# secret. Counting characters rather than wakes matters: a sweep of 100 KB with a pattern that has no
# literal prefix costs a millisecond or two, thirty windows of 300 characters a twentieth of that.
# A wake's own Python counts as this many characters searched.
WAKE_COST = 200


@dataclass(frozen=True)
class Rule:
    id: str
    kind: str  # what a refusal says was found: "a GitHub token", "a saved password"
    triggers: tuple[str, ...]
    locate: Locator = field(compare=False)
    sweep: Sweeper | None = field(default=None, compare=False)
    window: int = 0  # characters a locate searches, at most (for a rule with a sweep)
    # A regular expression that must match (in the lower-cased note) where a trigger starts: a
    # keyword counts only where a value can follow it ("password:", "token is"), so prose about
    # passwords costs one C-level check per mention.
    anchor: str | None = None


def regex_rule(
    rule_id: str,
    kind: str,
    triggers: Iterable[str],
    pattern: str,
    *,
    back: int = 0,
    ahead: int = 300,
    longest: int | None = None,
    flags: int = 0,
    accept: Callable[[re.Match[str]], bool] | None = None,
    anchor: str | None = None,
) -> Rule:
    """A rule whose ``pattern`` is searched from ``back`` characters before a trigger to ``ahead`` after it.

    ``accept`` judges a match (a placeholder body, a value that is only a reference); a match it
    rejects does not count. ``longest`` bounds a match's length (``back + ahead`` unless given):
    the next search may start that far before this one's end.

    With ``back=0`` every match must start where one of the triggers does (``AKIA…`` at ``akia``):
    the pattern is then tried at the trigger only. Searching on through the window would find only
    matches that their own triggers wake anyway, and a failed search of a 2,000-character window
    costs more than everything else done for the trigger.
    """
    overlap = back + ahead if longest is None else longest
    # Compiled on first use: a hook or a command loads every rule and uses few.
    regex = functools.cache(lambda: re.compile(pattern, flags))

    def locate_at_trigger(text: str, start: int, end: int, floor: int) -> tuple[int | None, int]:
        match = regex().match(text, start, min(len(text), end + ahead))
        return (start if match is not None and (accept is None or accept(match)) else None), floor

    def locate(text: str, start: int, end: int, floor: int) -> tuple[int | None, int]:
        window_end = min(len(text), end + ahead)
        for match in regex().finditer(text, max(0, start - back, floor), window_end):
            if accept is None or accept(match):
                return match.start(), window_end - overlap
        return None, window_end - overlap

    def sweep(text: str, floor: int) -> Iterator[int]:
        for match in regex().finditer(text, max(0, floor)):
            if accept is None or accept(match):
                yield match.start()

    return Rule(
        rule_id,
        kind,
        tuple(t.lower() for t in triggers),
        locate_at_trigger if back == 0 else locate,
        sweep,
        back + ahead,
        anchor,
    )


_Trie = dict[str, "_Trie"]


def _trie_pattern(words: Iterable[str]) -> str:
    """An alternation of literal words as a trie (``p(?:ass|w)``): one branch per character, no backtracking."""
    root: _Trie = {}
    for word in words:
        node = root
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}

    def build(node: _Trie) -> str:
        branches = [re.escape(ch) + build(child) for ch, child in sorted(node.items()) if ch]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        if "" in node:
            return (body if len(branches) > 1 else "(?:" + body + ")") + "?"
        return body

    return build(root)


def lowered_ascii(text: str) -> str:
    """The note lower-cased, every non-ASCII character a ``?``: triggers and anchors are ASCII.

    The offsets stay those of the note (``İ``.lower() would add a character), and lower-casing ASCII
    is a third of the cost of lower-casing Unicode. An anchor reads a non-ASCII space as a ``?``, so
    it may pass where it would not have (the rule then reads the note itself), never the reverse.
    """
    if text.isascii():
        return text.lower()
    return text.encode("ascii", "replace").decode("ascii").lower()


# Per trigger: groups of rules it wakes, each with the anchor (if any) that must match there first.
_Plan = tuple[tuple["re.Pattern[str] | None", tuple[Rule, ...]], ...]


@dataclass(frozen=True)
class Hit:
    rule: Rule
    offset: int


class Scanner:
    """Finds where rules fire. Build once (compiling the trie), use from any thread."""

    def __init__(self, rules: Sequence[Rule]) -> None:
        self.rules = tuple(rules)
        by_trigger: dict[str, list[Rule]] = {}
        for rule in self.rules:
            for trigger in rule.triggers:
                by_trigger.setdefault(trigger, []).append(rule)
        compiled = {a: re.compile(a) for a in {rule.anchor for rule in self.rules if rule.anchor is not None}}
        self._plans: dict[str, _Plan] = {}
        for trigger, rules_of_trigger in by_trigger.items():
            groups: dict[str | None, list[Rule]] = {}
            for rule in rules_of_trigger:
                groups.setdefault(rule.anchor, []).append(rule)
            self._plans[trigger] = tuple((None if a is None else compiled[a], tuple(rs)) for a, rs in groups.items())
        self._by_index = tuple(self._plans.values())
        self._automaton = None
        self._triggers = None
        if ahocorasick_rs is not None and self._plans:
            # Overlapping matches: every trigger, also one inside another ("token" in "access_token$").
            self._automaton = ahocorasick_rs.AhoCorasick(
                list(self._plans), implementation=ahocorasick_rs.Implementation.DFA
            )
        else:
            # The trie regex reports only the longest trigger at a position: the shorter triggers
            # inside it are reported with it, each where it starts.
            self._triggers = re.compile(_trie_pattern(by_trigger) or "(?!)")
            index = {trigger: i for i, trigger in enumerate(self._plans)}
            self._inside = {
                longer: [
                    (index[t], at, at + len(t))
                    for at in range(len(longer))
                    for t in by_trigger
                    if longer.startswith(t, at)
                ]
                for longer in by_trigger
            }

    def trigger_hits(self, lowered: str) -> list[tuple[int, int, int]]:
        """(plan index, start, end) of every trigger in the note."""
        if self._automaton is not None:
            return self._automaton.find_matches_as_indexes(lowered, overlapping=True)
        assert self._triggers is not None  # noqa: S101  narrows the type for mypy; never a check of input
        return [
            (i, match.start() + start, match.start() + end)
            for match in self._triggers.finditer(lowered)
            for i, start, end in self._inside[match.group()]
        ]

    def hits(self, text: str) -> Iterator[Hit]:
        """Secrets found, in the order their triggers appear (a rule reports a given offset once)."""
        seen: set[tuple[str, int]] = set()
        floors: dict[str, int] = {}
        searched: dict[str, int] = {}  # characters each rule's windows have searched so far
        swept: set[str] = set()
        lowered = lowered_ascii(text)
        by_index, size = self._by_index, len(text)
        for index, start, end in self.trigger_hits(lowered):
            for anchor, rules in by_index[index]:
                if anchor is not None and anchor.match(lowered, start) is None:
                    continue
                for rule in rules:
                    if rule.id in swept:
                        continue
                    floor = floors.get(rule.id, 0)
                    if rule.sweep is not None:
                        searched[rule.id] = spent = searched.get(rule.id, 0) + rule.window + WAKE_COST
                        if spent > size:
                            swept.add(rule.id)
                            yield from (
                                Hit(rule, offset) for offset in rule.sweep(text, floor) if (rule.id, offset) not in seen
                            )
                            continue
                    offset, floors[rule.id] = rule.locate(text, start, end, floor)
                    if offset is not None and (rule.id, offset) not in seen:
                        seen.add((rule.id, offset))
                        yield Hit(rule, offset)
