"""The benchmark harness (tests/bench) itself: its metrics on exact vectors, and a quick run end to end.

The benchmarks are not part of the test run; these tests keep the harness from rotting. The end-to-end
run takes a few seconds on tiny streams and is skipped when River (the ``bench`` extra) is missing.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest

from tests.bench.metrics import brier, log_loss, recoveries
from tests.bench.streams import Drift

if TYPE_CHECKING:
    from tests.bench.comparison import StreamResult


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
    for title in (
        "Verdict:",
        "Floor:",
        "Target:",
        "Probabilities:",
        "Short streams:",
        "Ensembles:",
        "Drift:",
        "Variants against",
    ):
        assert f"### {title}" in out
    assert "| sea | 1,200 | ours | **" in out and "| trump-approval (MAE) | 1,001 | ours | **" in out
    assert "| phishing | 1,200 | ours | **" in out
    drift_rows = [
        line for line in out.splitlines() if line.startswith("| sea-abrupt | 300 ±1 / 600 ±1 / 900 ±1 | ours")
    ]
    assert len(drift_rows) == 2 and "n/a" not in drift_rows[0]
    details = [  # each stream's details rows of ours (the variants' table also starts a row with a name)
        line
        for line in out.splitlines()
        if line.startswith(("| ours |", "| ours-paper |")) and "records) |" in line
    ]
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
    assert (run.records, f"{run.score:.2%}", str(run.drifts)) == (2000, rows[1][3], rows[1][4])
    assert settings("boosted", 3).n_members == 3 and settings().n_members is None


def test_core_bench_runs_the_regressors_and_scores_their_mae(capsys: pytest.CaptureFixture[str]) -> None:
    """``--task regression`` runs the worker's regressor on Friedman #1 records and prints its MAE,
    scored against the records' own targets: a misaligned scoring would be about the targets' spread
    (their mean absolute deviation is near 4), a model that learned them well below it."""
    from tests.bench.bench_worker_core import encoded_records, main, model_alone, settings

    assert main(["--records", "3000", "--run", "500", "--rounds", "1", "--task", "regression"]) == 0
    out = capsys.readouterr().out
    assert "3,000 records, runs of 500 per partition, 1 rounds, regression, model sgt" in out
    printed = float(out.split("the models' prequential MAE: ")[1].split()[0])
    run = model_alone(encoded_records(3000, "regression"), 500, settings(task="regression"))
    assert f"{run.score:.3f}" == f"{printed:.3f}" and run.records == 3000
    assert 0.0 < run.score < 3.0


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


# -- the robustness suite (--streams robust) --------------------------------------------------------


def test_stress_classification_streams_are_seeded_and_of_their_task() -> None:
    """Every generated classification stream draws the same records twice, int labels of its task."""
    from tests.bench import streams, stress

    for name, (_, n, task) in stress.CLASSIFICATION.items():
        (spec,) = streams.specs([name])
        assert (spec.group, spec.task, spec.n) == ("robust", task, n)
        first, again = streams.materialise(spec, 400), streams.materialise(spec, 400)
        assert np.array_equal(first.X, again.X) and first.y == again.y, name
        assert all(type(label) is int for label in first.y), name
        assert len(first.classes) == 2 if task == "binary" else len(first.classes) > 2, name
        assert np.isfinite(first.X).all(), name


def test_stress_classification_streams_have_the_shape_they_claim() -> None:
    from tests.bench import stress

    def drawn(name: str, n: int) -> tuple[np.ndarray, np.ndarray]:
        pairs = list(stress.CLASSIFICATION[name][0](n))
        return np.array([list(x.values()) for x, _ in pairs]), np.array([y for _, y in pairs])

    X, _ = drawn("stress-timestamp-binary", 500)
    assert X[:, 0].min() > 1e9 and X[:, 1:].max() <= 1.0
    X, _ = drawn("stress-micro-binary", 500)
    assert np.abs(X).max() <= 1e-6
    assert drawn("stress-irrelevant-binary", 10)[0].shape == (10, 30)
    _, y = drawn("stress-imbalance-95", 4000)
    assert 0.03 < y.mean() < 0.07
    _, y = drawn("stress-skewed-10", 4000)
    counts = np.bincount(y, minlength=10)
    assert counts[0] > 0.35 * 4000 and counts[9] < 0.01 * 4000 and (np.diff(counts[:6]) < 0).all()
    X, y = drawn("stress-led-24", 4000)
    assert X.shape == (4000, 24) and set(np.unique(X)) == {0.0, 1.0} and len(set(y)) == 10
    _, clean = drawn("stress-label-noise-10", 4000)  # the same records: only the flips differ
    _, noisy = drawn("stress-label-noise-30", 4000)
    # one draw decides the flips: the 30% flipped hold the 10%, so the two differ on about 20% of records
    assert 0.17 < (clean != noisy).mean() < 0.23
    X, y = drawn("stress-checkerboard", 4000)
    assert np.array_equal(y, np.floor(4 * X).astype(int).sum(axis=1) % 2)
    assert drawn("stress-moons-600", 600)[0].shape == (600, 2)


def test_held_out_streams_are_seeded_finite_and_of_their_task() -> None:
    """The ``heldout`` group: streams of names no other stream has (`specs` keys them by name, so a
    repeated name would hide a stream), each drawing the same finite records twice, with labels of its
    task."""
    pytest.importorskip("river")
    from tests.bench import streams

    held = streams.specs(["heldout"])
    assert len(held) >= 7 and all(s.group == "heldout" and s.n == 5_000 for s in held)
    names = [s.name for s in streams._specs()]
    assert len(names) == len(set(names))
    for spec in held:
        first, again = streams.materialise(spec, 300), streams.materialise(spec, 300)
        assert first.dicts == again.dicts and first.y == again.y, spec.name
        assert first.X is None or np.isfinite(first.X).all(), spec.name
        if spec.is_regression:
            assert first.classes == [], spec.name
        else:
            assert len(first.classes) == 2 if spec.task == "binary" else len(first.classes) > 2, spec.name


def test_the_nominal_random_tree_is_the_random_tree_with_its_categories_as_strings() -> None:
    """The same records, the categories named: ours learn from the dicts (`Stream.inputs`), and MOA,
    whose input is a float array, reports that it cannot run rather than read the categories as
    numbers."""
    pytest.importorskip("river")
    from tests.bench import peers, streams

    coded, named = (
        streams.materialise(streams.specs([name])[0], 50) for name in ("random-tree", "random-tree-nominal")
    )
    assert named.X is None and named.inputs is named.dicts and coded.inputs is coded.X
    assert named.y == coded.y
    for c, m in zip(coded.dicts, named.dicts, strict=True):
        assert list(m) == list(c)
        assert all(m[k] == (str(v) if k.startswith("x_cat") else v) for k, v in c.items())
        assert any(isinstance(v, str) for v in m.values())
    with pytest.raises(TypeError, match="nominal"):
        peers.run_moa(lambda schema: None, named)


def test_the_suite_holds_every_file_data_set_river_ships_or_names_why_not() -> None:
    """Each ``FileDataset`` in ``river.datasets`` is a stream of the robust group or is named, with its
    reason, in ``tests/bench/streams.py``'s docstring; bundled dates are POSIX seconds (UTC)."""
    pytest.importorskip("river")
    import inspect

    from river import datasets
    from river.datasets.base import FileDataset

    from tests.bench import streams

    suite = {s.name for s in streams.specs(["robust"])}
    bundled = {
        "Phishing": "phishing", "ImageSegments": "image-segments", "Bananas": "bananas", "Shuttle": "shuttle",
        "TrumpApproval": "trump-approval", "ChickWeights": "chick-weights", "SP500Stocks": "sp500-stocks",
        "AirlinePassengers": "airline-passengers", "WaterFlow": "water-flow",
    }  # fmt: skip
    left_out = streams.__doc__[streams.__doc__.index("Left out:") :]
    for name, cls in inspect.getmembers(datasets, inspect.isclass):
        if issubclass(cls, FileDataset):
            assert bundled.get(name) in suite or name in left_out, name
        elif issubclass(cls, datasets.base.RemoteDataset):
            assert name in left_out, name
    airline = streams.materialise(streams.specs(["airline-passengers"])[0], 2)
    assert airline.X[:, 0].tolist() == [-662688000.0, -660009600.0]  # 1949-01-01 and 1949-02-01, UTC


def test_river_ensembles_are_peers_for_their_tasks() -> None:
    pytest.importorskip("river")
    from tests.bench import peers

    ensembles = {(p.name, p.task) for p in peers.peers() if p.kind == peers.ENSEMBLE}
    assert ensembles == {
        ("river-arf", "classification"), ("river-amf", "classification"), ("river-srp", "classification"),
        ("river-lb", "classification"), ("moa-sgbt", "classification"), ("river-arf", "regression"),
        ("river-amf", "regression"), ("river-srp", "regression"), ("moa-sgbt", "regression"),
    }  # fmt: skip


# -- the verdict ----------------------------------------------------------------------------------


def _result(stream: str, models: dict[str, tuple[str, float, float]], log_loss: float = 0.5) -> StreamResult:
    """A StreamResult of ``name -> (kind, headline, records/s)``; log loss = Brier = ``log_loss`` for
    ``ours`` and 0.5 for the others."""
    from tests.bench.comparison import ModelResult, StreamResult
    from tests.bench.metrics import Scores
    from tests.bench.streams import specs

    (spec,) = specs([stream])

    def scores(headline: float, rate: float, loss: float) -> Scores:
        reg = spec.is_regression
        nan = math.nan
        return Scores(
            reg, 1000, 1000 / rate, headline, nan, nan, nan, nan if reg else loss, nan if reg else loss, ()
        )

    return StreamResult(
        spec,
        1000,
        (),
        tuple(
            ModelResult(name, kind, scores(h, rate, log_loss if name == "ours" else 0.5))
            for name, (kind, h, rate) in models.items()
        ),
        (),
    )


def test_verdict_judges_the_issue_figures_exactly() -> None:
    from tests.bench import report
    from tests.bench.comparison import OURS

    classification = _result(
        "stress-moons",
        {
            "ours": (OURS, 90.0, 1e3), "ours-boosted": (OURS, 92.0, 2e5),
            "river-sgt": ("SGT", 90.0, 1e3), "moa-sgt": ("SGT", 90.1, 1e3),  # ours 0.1 below: no margin
            "river-ht": ("single tree", 91.0, 1e3),  # within 1 point
            "river-arf": ("ensemble", 91.0, 1e4), "river-amf": ("ensemble", 92.5, 1e3),  # AMF the best
        },
        log_loss=0.4,
    )  # fmt: skip
    regression = _result(
        "stress-step",
        {
            "ours": (OURS, 1.04, 1e3), "ours-constant": (OURS, 1.0, 1e3), "ours-linear": (OURS, 1.2, 1e3),
            "ours-boosted": (OURS, 0.9, 1e5), "river-sgt": ("SGT", 1.04, 1e3),
            "river-htr": ("single tree", 0.98, 1e3), "river-arf": ("ensemble", 0.95, 1e4),
        },
    )  # fmt: skip
    judged = [[t.judge(r) for t in report.TARGETS] for r in (classification, regression)]
    texts = [[None if c is None else c.text for c in row] for row in judged]
    assert texts[0] == [
        "FAIL (-0.1 pt)", "PASS (-1.0 pt)", "PASS (-20%)", "PASS (-20%)", None, None,
        "FAIL (-0.5 pt) vs river-amf", "PASS (20.0×)",
    ]  # fmt: skip
    assert texts[1] == [
        "PASS (+0.0%)", "FAIL (+6.1%)", None, None, "PASS (+4.0%)", "PASS (+0%)",
        "PASS (-5.3%) vs river-arf", "FAIL (10.0×)",
    ]  # fmt: skip
    assert report.verdict_counts([classification, regression]) == [
        (t.title, held, judged)
        for t, (held, judged) in zip(
            report.TARGETS, [(1, 2), (1, 2), (1, 1), (1, 1), (1, 1), (1, 1), (1, 2), (1, 2)], strict=True
        )
    ]
    table = report.verdict_table([classification, regression])
    assert table.splitlines()[-1].startswith("| **holds on** | 2 streams |  |  | 1 of 2 | 1 of 2 | 1 of 1 |")


def test_verdict_is_silent_where_a_model_is_missing() -> None:
    from tests.bench import report
    from tests.bench.comparison import OURS

    alone = _result("stress-step", {"ours": (OURS, 1.0, 1e3)})
    assert [t.judge(alone) for t in report.TARGETS] == [None] * len(report.TARGETS)
    assert all(judged == 0 for _, _, judged in report.verdict_counts([alone]))


def test_variants_are_counted_against_their_own_default() -> None:
    from tests.bench import report
    from tests.bench.comparison import OURS

    moons = _result(
        "stress-moons",
        {
            "ours": (OURS, 90.0, 1e3), "ours-constant": (OURS, 89.95, 1e3), "ours-boosted": (OURS, 92.0, 1e4),
            "ours-boosted-n3": (OURS, 93.0, 1e4), "river-arf": ("ensemble", 92.5, 1e3),
        },
    )  # fmt: skip
    step = _result(
        "stress-step",
        {
            "ours-boosted": (OURS, 1.0, 1e4),
            "ours-boosted-n3": (OURS, 4.0, 1e4),
            "river-arf": ("ensemble", 2.0, 1e3),
        },
    )
    constant, n3 = report.variant_summaries([moons, step])
    fields = (constant.name, constant.default, constant.streams, constant.better, constant.worse)
    assert fields == ("ours-constant", "ours", 1, 0, 0)  # 0.05 points below: neither better nor worse
    assert (constant.beats_ensembles, constant.judged) == (0, 1) and math.isnan(constant.mae_ratio)
    assert constant.points == pytest.approx(-0.05)
    assert (n3.default, n3.streams, n3.better, n3.worse, n3.beats_ensembles, n3.judged) == (
        "ours-boosted",
        2,
        1,
        1,
        1,
        2,
    )
    assert n3.points == pytest.approx(1.0) and n3.mae_ratio == pytest.approx(4.0)


def test_a_peer_that_fails_is_reported_and_the_run_goes_on() -> None:
    """A peer raising on a stream (MOA's SGBT on a one-feature data set) is listed as not run with its
    error, and the other models' results stand; a later run of it replaces the note when merged."""
    from tests.bench import comparison, peers, report, saved, streams
    from tests.bench.metrics import Predictions

    def broken(stream: streams.Stream) -> Predictions:
        raise RuntimeError("subspaces is null")

    def fine(stream: streams.Stream) -> Predictions:
        return peers.run_majority(stream)

    moons = streams.specs(["stress-moons-600"])
    selection = comparison.Selection((), (
        peers.Peer("broken", peers.ENSEMBLE, peers.CLASSIFICATION, broken),
        peers.Peer("majority", peers.BASELINE, peers.CLASSIFICATION, fine),
    ))  # fmt: skip
    (result,) = comparison.compare(moons, selection, 200, lambda message: None)
    assert [m.name for m in result.models] == ["majority"]
    assert result.skipped == ("broken: failed, RuntimeError: subspaces is null",)
    assert "Not run: broken: failed, RuntimeError: subspaces is null." in report.details(result)
    fixed = comparison.Selection((), (peers.Peer("broken", peers.ENSEMBLE, peers.CLASSIFICATION, fine),))
    again = comparison.compare(moons, fixed, 200, lambda message: None)
    (merged,) = saved.merge([saved.Run(100, [result]), saved.Run(100, again)]).results
    assert [m.name for m in merged.models] == ["majority", "broken"] and merged.skipped == ()


def test_each_variant_runs_untimed_once_per_task_before_its_first_timed_stream() -> None:
    """The kernels' loading and lazy imports are paid once per process, before any clock starts: each
    variant's first stream of a task is preceded by a run on the synthetic warm-up stream (four
    features, `ours.WARM_RECORDS` records), and only its first."""
    from tests.bench import comparison, ours, streams

    calls: list[tuple[str, int]] = []  # (task, features) of each batch learned

    class Recording:
        def __init__(self, spec: streams.StreamSpec) -> None:
            self._task = spec.task
            self._model = ours.VARIANTS[0].make(spec)

        def predict_learn_many(self, X: np.ndarray, y: list[object]) -> np.ndarray:
            calls.append((self._task, X.shape[1]))
            return self._model.predict_learn_many(X, y)

        def __getattr__(self, name: str) -> object:
            return getattr(self._model, name)

    specs = streams.specs(["stress-moons-600", "stress-checkerboard-1k", "stress-timestamp-600"])
    selection = comparison.Selection((ours.Variant("recording", Recording),), ())
    comparison.compare(specs, selection, 300, lambda message: None, loop=50)
    warm = ours.WARM_RECORDS // ours.BATCH  # the warm-up's batches
    timestamp = len(streams.materialise(specs[2], 10).feature_names)
    assert calls == (
        [("binary", 4)] * warm
        + [("binary", 2)] * 2  # moons-600 and checkerboard-1k: two features each
        + [("regression", 4)] * warm
        + [("regression", timestamp)]
    )


def test_the_budget_benchmark_runs_unbounded_models_when_told_none() -> None:
    """`--budgets none` is an unbounded model (a None value had left the worker's default, 32 MiB)."""
    from tests.bench.bench_budget import settings_for

    assert settings_for("sgt", None).model_max_bytes is None
    assert settings_for("boosted", 2**20).model_max_bytes == 2**20
