"""The instruments (gitmem/metrics.py): inert and free until enabled, then counted and rendered."""

from __future__ import annotations

import subprocess
import sys

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from gitmem import metrics


def _samples() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = generate_latest(metrics.registry()).decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_inert_until_enabled_without_importing_prometheus_client() -> None:
    script = (
        "import sys\n"
        "from gitmem import metrics\n"
        "metrics.WRITES.labels('committed').inc()\n"
        "metrics.WRITE_BATCH_SIZE.observe(3)\n"
        "with metrics.SEARCH_SECONDS.time(): pass\n"
        "metrics.OPEN_STORES.set(4)\n"
        "assert not metrics.enabled()\n"
        "assert 'prometheus_client' not in sys.modules, 'imported while off'\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True)


def test_counts_once_enabled() -> None:
    metrics.enable()
    before = _samples()
    metrics.WRITES.labels("committed").inc(3)
    metrics.WRITE_BATCH_SIZE.observe(3)
    metrics.REQUESTS.labels("GET", "/v1/memory_stores/{memory_store_id}", "200").inc()
    with metrics.SEARCH_SECONDS.time():
        pass
    metrics.sample_process()
    after = _samples()

    def delta(name: str, **labels: str) -> float:
        key = (name, tuple(sorted(labels.items())))
        return after.get(key, 0.0) - before.get(key, 0.0)

    assert delta("gitmem_writes_total", outcome="committed") == 3
    assert delta("gitmem_write_batch_size_bucket", le="4.0") == 1
    assert delta("gitmem_write_batch_size_bucket", le="2.0") == 0
    assert (
        delta("gitmem_http_requests_total", method="GET", route="/v1/memory_stores/{memory_store_id}", status="200")
        == 1
    )
    assert delta("gitmem_search_duration_seconds_count") == 1
    assert after[("gitmem_process_free_descriptors", ())] > 0
