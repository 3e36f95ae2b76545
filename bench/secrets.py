"""What the secret detector costs on a 100 KB note, beside baselines timed in the same run.

    python -m bench.secrets [--size 102400] [--rounds 15] [--corpus-only]

The first line is the detector's rates on the test corpus (tests/secrets_corpus: the project's own
cases and those grown from public scanners' test data): the share of credentials refused (recall)
and of ordinary notes refused (false positives). ``--corpus-only`` prints that line alone.

Each note is ``--size`` characters: plain prose, this project's own docs and Python source (technical
notes that mention keys and tokens at a natural rate), the test corpus's ordinary notes repeated (an
extreme: a ``key: value`` line every ~85 characters), a note full of credentials (the corpus's
positives) and some hostile inputs. Baselines, on the same text: one ``re.search`` for a literal
(one pass at C speed), the detector's own first pass alone (lower-casing the note and finding its
trigger words: the floor of what the rules add to) and the three regular-expression filters that
the detector replaced. Cells
are CPU time (``time.process_time``, the best of the rounds, so that other processes on a shared
machine count less), in milliseconds; the ratios are detector / baseline. The target is at most
2 ms for 100 KB of ordinary notes on a quiet machine; the first line times a fixed Python loop
so that numbers from a slower or busier machine can be scaled.
"""

from __future__ import annotations

import argparse
import random
import re
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from gitmem.rules.secrets import SecretDetector, _scanner, find_secrets
from gitmem.rules.secrets.engine import Scanner, lowered_ascii
from gitmem.rules.secrets.values import words
from tests.secrets_corpus import load

# The filters gitmem shipped before the detector, kept here as the baseline it replaced.
_OLD_FILTERS = [
    re.compile(p)
    for p in (
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----",
        r"\bAKIA[0-9A-Z]{16}\b|\bgh[pousr]_[A-Za-z0-9]{36,}\b|\bgithub_pat_[A-Za-z0-9_]{60,}\b"
        r"|\bxox[abposr]-[A-Za-z0-9-]{10,}\b|\bsk-ant-[A-Za-z0-9_-]{20,}\b|\bsk-(?:proj-)?[A-Za-z0-9_-]{32,}\b"
        r"|\bAIza[0-9A-Za-z_-]{35}\b|\bglpat-[A-Za-z0-9_-]{20,}\b|\b(?:sk|rk)_live_[A-Za-z0-9]{20,}\b"
        r"|\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}|\bgm_(?:key|usr|tsk)_[A-Za-z0-9_-]{20,}\b",
        r"(?i)(?<![a-z0-9])(?:pass(?:word|wd|phrase)?|pwd|secret[_-]?key|client[_-]?secret)\b[\"']?\s*[:=]\s*[\"']?"
        r"[^\s\"'<>]{4,}",
        r"(?i)\b[a-z][a-z0-9+.-]*://[^\s:/@]+:[^\s@/]{3,}@",
    )
]
_LITERAL = re.compile("a literal that never occurs")
ROOT = Path(__file__).resolve().parent.parent
PROSE_WORDS = words(
    "the of and to in is that for it as was with be by on not he this are or his from at which but "
    "have an they you were her all she there would their we him been has when who will more no if "
    "out so said what up its about into than them can only other new some could time these two may "
    "then do first any my now such like our over man me even most made after also did many before "
    "must through back years where much your way well down should because each just those people"
)


def _repeat_to(parts: list[str], size: int) -> str:
    text: list[str] = []
    i = 0
    while sum(map(len, text)) < size:
        text.append(parts[i % len(parts)] + "\n\n")
        i += 1
    return "".join(text)[:size]


def notes(size: int) -> dict[str, str]:
    rng = random.Random(3)
    prose = " ".join(rng.choice(PROSE_WORDS) for _ in range(size // 4))
    return {
        "plain prose": prose[:size],
        "project docs (README, docs/)": _repeat_to(
            [p.read_text() for p in (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))], size
        ),
        "Python source (gitmem/*.py)": _repeat_to(
            [p.read_text() for p in sorted((ROOT / "gitmem").glob("*.py"))], size
        ),
        "corpus notes (keyword-dense)": _repeat_to([t for _, t in load("negatives")], size),
        "notes full of credentials": _repeat_to([t for _, t in load("positives")], size),
        "hostile: 'password=' repeated": ("password=" * (size // 9 + 1))[:size],
        "hostile: one long base64 run": ("QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo0NTY3" * (size // 40 + 1))[:size],
        "hostile: '-----BEGIN' repeated": ("-----BEGIN" * (size // 10 + 1))[:size],
    }


def _best_ms(fn: Callable[[], object], rounds: int) -> float:
    fn()  # warm: compiled patterns, caches
    times = []
    for _ in range(rounds):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return min(times) * 1000


def _python_loop() -> None:
    for _ in range(100_000):
        pass


def _first_pass(scanner: Scanner, text: str) -> None:
    scanner.trigger_hits(lowered_ascii(text))


def _old_filters(text: str) -> None:
    for pattern in _OLD_FILTERS:
        pattern.search(text)


def run(size: int, rounds: int) -> list[tuple[str, float, float, float, float]]:
    detector = SecretDetector()
    scanner = _scanner(detector.allow)
    rows = []
    for name, text in notes(size).items():
        ours = _best_ms(partial(detector.findings, text), rounds)
        literal = _best_ms(partial(_LITERAL.search, text), rounds)
        triggers = _best_ms(partial(_first_pass, scanner, text), rounds)
        old = _best_ms(partial(_old_filters, text), rounds)
        rows.append((name, ours, literal, triggers, old))
    return rows


def corpus_rates() -> str:
    positives, negatives = load("positives"), load("negatives")
    found = sum(1 for _, text in positives if find_secrets(text))
    wrong = sum(1 for _, text in negatives if find_secrets(text))
    return (
        f"corpus: {found}/{len(positives)} credentials refused ({found / len(positives):.1%} recall),"
        f" {wrong}/{len(negatives)} ordinary notes refused ({wrong / len(negatives):.1%} false positives)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=102_400, help="characters per note")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--corpus-only", action="store_true", help="print the corpus rates alone")
    args = parser.parse_args()
    print(corpus_rates())
    if args.corpus_only:
        return
    print(
        f"note size {args.size} characters, best of {args.rounds} rounds, CPU ms; a 100,000-step Python loop "
        f"takes {_best_ms(_python_loop, args.rounds):.2f} ms here (about 1 on a quiet laptop)\n"
    )
    header = (
        f"{'note':34} {'detector':>9} {'1 literal':>10} {'1st pass':>9} {'old filters':>12} {'/literal':>9}"
        f" {'/1st pass':>10} {'/old':>7}"
    )
    print(header)
    print("-" * len(header))
    for name, ours, literal, triggers, old in run(args.size, args.rounds):
        print(
            f"{name:34} {ours:9.3f} {literal:10.3f} {triggers:9.3f} {old:12.3f} {ours / literal:8.0f}x"
            f" {ours / triggers:9.1f}x {ours / old:6.1f}x"
        )


if __name__ == "__main__":
    main()
