"""The benchmark harness (tests/bench) itself: its metrics on exact vectors, and a quick run end to end.

The benchmarks are not part of the test run; these tests keep the harness from rotting. The end-to-end
run takes a few seconds on tiny streams and is skipped when River (the ``bench`` extra) is missing.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from tests.bench.metrics import brier, log_loss, recoveries
from tests.bench.streams import Drift


def test_log_loss_and_brier_exact() -> None:
    truth = np.array([0, 1, 2, 0])
    proba = np.array(
        [
            [0.5, 0.25, 0.25],  # p(true) 0.5; Brier 0.25 + 0.0625 + 0.0625
            [2.0, 2.0, 0.0],  # unnormalised votes: divided by their sum, p(true) 0.5; Brier 0.25 + 0.25 + 0
            [1.0, 0.0, 0.0],  # p(true) 0: clipped to 1e-15; Brier 1 + 0 + 1
            [0.0, 0.0, 0.0],  # nothing published: p(true) 0; Brier 1
        ]
    )
    expected_loss = (-math.log(0.5) * 2 - 2 * math.log(1e-15)) / 4
    assert log_loss(truth, proba) == pytest.approx(expected_loss, rel=1e-12)
    assert brier(truth, proba) == pytest.approx((0.375 + 0.5 + 2.0 + 1.0) / 4, rel=1e-12)


def test_recovery_after_an_abrupt_drift_counts_from_the_drift_to_the_first_clean_window() -> None:
    err = np.zeros(200)
    err[50:70] = 1.0  # wrong for 20 records after the drift at 50
    (rec,) = recoveries(err, (Drift(50, 0),), regression=False, window=10)
    # the first window [t - 10, t) without an error and wholly after the drift ends at t = 80
    assert rec.before == 0.0 and rec.records == 30 and rec.measurable


def test_recovery_tolerates_one_point_and_reports_never_and_unmeasurable() -> None:
    err = np.zeros(400)
    err[::100] = 1.0  # pre-drift window of 100 holds exactly one error: level 0.01
    err[150:250] = 1.0  # after the drift at 150, wrong until the next drift's start
    drifts = (Drift(150, 0), Drift(250, 0), Drift(390, 0))
    first, second, third = recoveries(err, drifts, regression=False, window=100)
    assert first.measurable and first.records is None  # never back before the next drift
    assert second.before == 1.0 and second.records == 100  # back at once: the minimum is the window
    assert not third.measurable and third.records is None  # 10 records after it: no full window


def test_recovery_of_a_gradual_drift_and_of_a_regression() -> None:
    err = np.full(300, 2.0)
    err[95:130] = 10.0  # the change (centre 100, width 10: records 95 to 104) and some records after it
    (rec,) = recoveries(err, (Drift(100, 10),), regression=True, window=20)
    # pre-drift level: MAE 2.0 over [75, 95); within 5%: the first all-2.0 window [130, 150), from end 105
    assert rec.before == 2.0 and rec.records == 150 - 105


def test_quick_run_end_to_end(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Every question's table on tiny streams (one of each kind), and ours batched ≡ ours in a loop;
    the saved results render as the same comparison."""
    pytest.importorskip("river")
    from tests.bench.__main__ import main as bench_main

    saved = tmp_path / "results.json"
    argv = [
        "--quick", "--records", "1200", "--window", "100",
        "--streams", "sea,phishing,trump-approval,sea-abrupt",
        "--models", "ours,ours-paper,river-sgt,river-ht,river-htr,majority,mean", "--save", str(saved),
    ]  # fmt: skip
    assert bench_main(argv) == 0
    out = capsys.readouterr().out
    assert bench_main(["--merge", str(saved)]) == 0
    merged = capsys.readouterr().out
    comparison = out[out.index("## Side by side") : out.index("## Speed")].strip()
    assert merged[merged.index("## Side by side") :].startswith(comparison)
    for title in ("Floor:", "Target:", "Probabilities:", "Short streams:", "Ensembles:", "Drift:"):
        assert f"### {title}" in out
    assert "| sea | 1,200 | ours | **" in out and "| trump-approval (MAE) | 1,001 | ours | **" in out
    assert "| phishing | 1,200 | ours | **" in out
    drift_rows = [
        line for line in out.splitlines() if line.startswith("| sea-abrupt | 300 ±1 / 600 ±1 / 900 ±1 | ours")
    ]
    assert len(drift_rows) == 2 and "n/a" not in drift_rows[0]
    details = [line for line in out.splitlines() if line.startswith(("| ours |", "| ours-paper |"))]
    assert len(details) == 8 and all("| yes |" in line for line in details)  # loop ≡ batch on every stream
    assert "| ours, batches of 1,000, whole stream | 1,200 |" in out and "| River SGT | 480 |" in out
    assert "| ours: split statistics" in out and "River SGT: a leaf's quantizer" in out


def test_median_recovery_counts_never_as_longer_than_any() -> None:
    from tests.bench.recovery_seeds import median_recovery

    assert median_recovery([1000, None, 2000]) == 2000.0
    assert median_recovery([1000, 1500, 2000, 2500]) == 1750.0
    assert median_recovery([None, 5, None]) is None
    assert median_recovery([None, 5, 7, None]) is None  # the median lies between 7 and never


def test_recovery_over_seeds_end_to_end(capsys: pytest.CaptureFixture[str]) -> None:
    """Each seed's recoveries and their median, for ours and River's ARF, on a tiny drift stream."""
    pytest.importorskip("river")
    from tests.bench.recovery_seeds import main as seeds_main

    argv = ["--records", "1200", "--window", "100", "--streams", "sea-abrupt", "--seeds", "0,1,2"]
    assert seeds_main([*argv, "--models", "ours-boosted,river-arf"]) == 0
    rows = [
        line for line in capsys.readouterr().out.splitlines() if line.startswith("| ") and "---" not in line
    ]
    assert rows[0].startswith("| sea-abrupt | accuracy % (mean) | drift 1 at 300: median (each seed)")
    assert [row.split(" | ")[0] for row in rows[1:]] == ["| ours-boosted", "| river-arf"]
    for row in rows[1:]:
        assert all(cell.count(",") == 2 for cell in row.split(" | ")[2:])  # three seeds per drift


def test_saved_runs_merge_by_stream_with_ours_first() -> None:
    """Two runs split by model render as one: each stream holds both runs' models, ours first, and a
    model run again replaces the earlier result; runs of different lengths do not merge."""
    pytest.importorskip("river")  # the streams and the peers come from the bench extra
    from tests.bench import comparison, saved, streams

    sea = streams.specs(["sea-1k"])

    def run(models: list[str], records: int = 300) -> saved.Run:
        results = comparison.compare(sea, comparison.select(models), records, lambda message: None)
        return saved.loads(saved.dumps(saved.Run(100, results)))

    peers_run, ours_run, again = run(["majority"]), run(["ours"]), run(["majority"])
    (merged,) = saved.merge([peers_run, ours_run, again]).results
    assert [m.name for m in merged.models] == ["ours", "majority"]
    assert merged.models[0] is ours_run.results[0].models[0]
    assert merged.models[1] is again.results[0].models[0]
    with pytest.raises(ValueError, match="sea-1k: 300 records in one run, 400 in another"):
        saved.merge([peers_run, run(["ours"], 400)])


def test_core_bench_sizes_the_ensemble_and_scores_it(capsys: pytest.CaptureFixture[str]) -> None:
    """``--members`` runs the boosted ensemble with each size and prints its rates and accuracy, the
    latter scored against the records' own labels (a misaligned scoring would sit near chance)."""
    from tests.bench.bench_worker_core import encoded_records, main, model_alone, settings

    assert main(["--records", "2000", "--run", "250", "--rounds", "1", "--members", "1,3"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[2:]]
    assert [row[0] for row in rows] == ["1", "3"]
    for row in rows:
        assert 60.0 < float(row[3].rstrip("%")) <= 100.0
    run = model_alone(encoded_records(2000), 250, settings("boosted", 3))
    assert (run.records, f"{run.accuracy:.2%}", str(run.drifts)) == (2000, rows[1][3], rows[1][4])
    assert settings("boosted", 3).n_members == 3 and settings().n_members is None


def test_soak_helpers_examples() -> None:
    """The soak benchmark's stall watch, percentiles and metric parsing (their docstring examples)."""
    import doctest

    from tests.bench import bench_soak

    result = doctest.testmod(bench_soak)
    assert result.failed == 0 and result.attempted >= 4


@pytest.mark.kafka  # starts its own embedded broker and a worker process
@pytest.mark.timeout(180)
def test_soak_runs_a_few_seconds_and_prints_its_rows(capsys: pytest.CaptureFixture[str]) -> None:
    from tests.bench.bench_soak import SoakOptions, soak

    rows = soak(SoakOptions(seconds=6.0, rate=200.0, partitions=2, interval_s=3.0, stall_s=30.0))
    out = capsys.readouterr().out
    assert "p50 ms" in out and "soak: done; the worker exited with code 0" in out
    assert len(rows) >= 2
    last = rows[-1]
    assert 0 < last.delivered <= last.produced and last.rate > 0
    assert set(last.model_bytes) == {0, 1} and all(b > 0 for b in last.model_bytes.values())
    assert last.p50_ms > 0 and last.rss_mb > 50
