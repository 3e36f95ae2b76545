"""gitmem.recent.Recent: what a process remembers per store stays within its size, the least recently
used forgotten first."""

from __future__ import annotations

import threading

from gitmem.recent import Recent


def test_keeps_the_most_recently_used_within_its_size() -> None:
    recent: Recent[str, int] = Recent(3)
    for i, key in enumerate("abc"):
        recent.put(key, i)
    assert recent.get("a") == 0  # a read makes "a" the most recent
    recent.put("d", 3)
    assert len(recent) == 3 and recent.get("b") is None  # "b" was the least recent
    assert [recent.get(k) for k in "acd"] == [0, 2, 3]


def test_get_or_put_makes_once_and_forget_and_drop_remove() -> None:
    recent: Recent[tuple[str, int], str] = Recent(10)
    made: list[str] = []

    def make() -> str:
        made.append("view")
        return "view"

    for _ in range(3):
        assert recent.get_or_put(("s", 1), make) == "view"
    assert made == ["view"]
    recent.put(("s", 2), "newer")
    recent.put(("t", 1), "other store")
    recent.drop(lambda key: key[0] == "s")
    assert recent.get(("s", 1)) is None and recent.get(("s", 2)) is None and recent.get(("t", 1)) == "other store"
    recent.forget(("t", 1))
    assert len(recent) == 0


def test_threads_together_never_push_it_past_its_size() -> None:
    recent: Recent[int, int] = Recent(50)

    def fill(base: int) -> None:
        for i in range(2_000):
            recent.get_or_put(base + i, lambda: base)

    threads = [threading.Thread(target=fill, args=(n * 10_000,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(recent) == 50
