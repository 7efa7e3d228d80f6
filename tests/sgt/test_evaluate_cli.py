"""Tests of the `sgt-evaluate` command on small CSV and JSON-lines files written into tmp_path."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sgt import SGTClassifier, SGTRegressor
from sgt.cli import main
from sgt.evaluation import Prequential

N = 1500


def classification_rows(n: int = N, seed: int = 3) -> list[dict]:
    """x0 ~ U(0,1), x1 ~ U(0,1000), a colour; label 'yes' iff x0 > 0.5; some missing cells and labels."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        x0, x1 = float(rng.random()), float(rng.random() * 1000)
        colour = ["red", "green", "blue"][int(rng.integers(3))]
        rows.append(
            {
                "x0": x0,
                "x1": None if i % 97 == 5 else x1,
                "colour": colour,
                "label": None if i % 50 == 7 else ("yes" if x0 > 0.5 else "no"),
            }
        )
    return rows


def regression_rows(n: int = N, seed: int = 4) -> list[dict]:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        x0, x1 = float(rng.random()), float(rng.random())
        y = 10.0 * x0 + (5.0 if x1 > 0.3 else 0.0) + float(rng.normal())
        rows.append({"x0": x0, "x1": x1, "y": None if i % 40 == 1 else y})
    return rows


def write_csv(path: Path, rows: list[dict]) -> Path:
    names = list(rows[0])
    lines = [",".join(names)]
    lines += [
        ",".join("" if r[k] is None else repr(r[k]) if isinstance(r[k], float) else r[k] for k in names)
        for r in rows
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def evaluate(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> dict:
    assert main([str(a) for a in argv]) == 0
    return json.loads(capsys.readouterr().out)


def direct_classification(
    rows: list[dict], target: str, window: int, **params: float
) -> tuple[Prequential, SGTClassifier]:
    """The prequential loop written out with the library, one record at a time."""
    model, metric = SGTClassifier(**params), Prequential("classification", window)
    for r in rows:
        x = {k: v for k, v in r.items() if k != target}
        y = r[target]
        if y is not None:
            proba = model.predict_proba_one(x)
            pred = (
                max(model.classes_, key=lambda c: proba.get(c, 0.0))
                if proba and max(proba.values()) > 0
                else None
            )
            metric.update(y, pred, proba.get(y, 0.0))
            model.learn_one(x, y)
    return metric, model


def test_csv_classification_matches_the_library_loop(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = classification_rows()
    path = write_csv(tmp_path / "data.csv", rows)
    out = evaluate(
        capsys, path, "--target", "label", "--window", "200", "--warm-up", "100", "--lambda", "0.5"
    )
    metric, model = direct_classification(rows, "label", 200, warm_up=100, lambda_=0.5)
    assert out["records"] == N
    assert out["n"] == metric.n == sum(r["label"] is not None for r in rows)
    assert out["unlabelled"] == N - metric.n
    assert out["error"] == metric.error
    assert out["recent_error"] == metric.recent_error
    assert out["accuracy"] == metric.accuracy
    assert math.isclose(out["log_loss"], metric.log_loss, rel_tol=1e-9)
    assert (out["n_nodes"], out["depth"], out["n_splits"]) == (model.n_nodes, model.depth, model.n_splits)
    assert out["accuracy"] > 0.9 and out["n_splits"] >= 1
    assert out["seconds"] > 0 and out["records_per_second"] > 0
    assert "mae" not in out


@pytest.mark.parametrize("batch_size", ["1", "7", "5000"])
def test_batch_size_does_not_change_the_result(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], batch_size
) -> None:
    path = write_csv(tmp_path / "data.csv", classification_rows())
    reference = evaluate(capsys, path, "--target", "label")
    out = evaluate(capsys, path, "--target", "label", "--batch-size", batch_size)
    for key in ("n", "error", "recent_error", "accuracy", "n_nodes", "n_leaves", "depth", "n_splits"):
        assert out[key] == reference[key], key
    assert math.isclose(out["log_loss"], reference["log_loss"], rel_tol=1e-9)


def test_jsonl_regression_matches_the_library_loop(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = regression_rows()
    path = write_jsonl(tmp_path / "data.jsonl", rows)
    out = evaluate(capsys, path, "--target", "y", "--task", "regression", "--grace-period", "100")
    model, metric = SGTRegressor(grace_period=100), Prequential("regression")
    for r in rows:
        x = {"x0": r["x0"], "x1": r["x1"]}
        if r["y"] is not None:
            metric.update(r["y"], model.predict_one(x))
            model.learn_one(x, r["y"])
    assert out["n"] == metric.n and out["unlabelled"] == N - metric.n
    assert math.isclose(out["mae"], metric.mae, rel_tol=1e-9)
    assert math.isclose(out["rmse"], metric.rmse, rel_tol=1e-9)
    assert out["error"] == out["mae"]
    assert out["n_splits"] == model.n_splits >= 1
    assert "accuracy" not in out and "log_loss" not in out


def test_csv_and_jsonl_of_the_same_data_agree(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = classification_rows(800)
    from_csv = evaluate(capsys, write_csv(tmp_path / "a.csv", rows), "--target", "label")
    from_jsonl = evaluate(capsys, write_jsonl(tmp_path / "a.jsonl", rows), "--target", "label")
    for key in ("records", "n", "error", "recent_error", "log_loss", "n_nodes", "n_splits"):
        assert from_csv[key] == from_jsonl[key], key


def test_csv_cells(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Quoted fields, a BOM, blank lines, spaces, a number in a nominal column and --nominal are all read."""
    text = '\ufeffzip,"city, country",size,y\n 1010 ,"Paris, FR",1.5,a\n\n2020,"Oslo, NO",7,b\n'
    text += "1010,,,a\n3030,7,2,b\n"
    path = tmp_path / "c.csv"
    path.write_text(text, encoding="utf-8")
    out = evaluate(capsys, path, "--target", "y", "--nominal", "zip", "--batch-size", "1")
    assert (out["records"], out["n"], out["n_nodes"]) == (4, 4, 1)


def test_jsonl_nominal_flag_reads_numbers_as_categories(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "a.jsonl"
    path.write_text('{"a": "red", "y": 0}\n{"a": 7, "y": 1}\n{"a": true, "y": 1}\n', encoding="utf-8")
    assert evaluate(capsys, path, "--target", "y", "--nominal", "a")["records"] == 3


def test_progress_bar_and_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_csv(tmp_path / "data.csv", classification_rows())
    png = tmp_path / "curve.png"
    assert (
        main([str(path), "--target", "label", "--progress", "--plot", str(png), "--batch-size", "300"]) == 0
    )
    captured = capsys.readouterr()
    assert json.loads(captured.out)["records"] == N
    assert "100%" in captured.err and f"{N:,} records" in captured.err and captured.err.endswith("\n")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000


def test_progress_without_tqdm_names_the_extra_to_install(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "tqdm", None)  # as if not installed
    path = write_csv(tmp_path / "data.csv", classification_rows(300))
    with pytest.raises(SystemExit) as exit_info:
        main([str(path), "--target", "label", "--progress"])
    assert exit_info.value.code == 2
    assert "--progress needs tqdm; install the progress extra: pip install 'sgt-stream[progress]'" in (
        capsys.readouterr().err
    )


def test_no_progress_bar_without_a_terminal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    evaluate(capsys, write_csv(tmp_path / "data.csv", classification_rows(300)), "--target", "label")
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    ("name", "content", "argv", "message"),
    [
        ("a.csv", "a,y\n1,x\n2\n", [], "a.csv:3: expected 2 fields, found 1"),
        (
            "a.csv",
            "a,y\n1,x\n",
            ["--task", "regression"],
            "a.csv:2: the regression target must be a number, got 'x'",
        ),
        ("a.csv", "a,y\n1,inf\n", ["--task", "regression"], "a.csv:2: the regression target must be finite"),
        ("a.csv", "a,b\n1,2\n", [], "a.csv:1: the target column 'y' is not in the header"),
        ("a.csv", "", [], "a.csv:1: the file is empty"),
        ("a.csv", "a,a,y\n1,2,3\n", [], "a.csv:1: duplicate column names"),
        ("a.csv", "a,y\n,\n", [], "no record has a value for the target 'y'"),
        ("a.jsonl", '{"a": 1, "y": 0}\n{"a": 1, "y": \n', [], "a.jsonl:2: invalid JSON"),
        ("a.jsonl", '{"a": 1, "y": 0}\n\n[1, 2]\n', [], "a.jsonl:3: expected a JSON object, got list"),
        (
            "a.jsonl",
            '{"a": {"b": 1}, "y": 0}\n',
            [],
            "a.jsonl:1: feature 'a' must be a number, a string or null",
        ),
        ("a.jsonl", '{"a": 1, "y": [0]}\n', [], "a.jsonl:1: a class label must be a JSON scalar"),
        (
            "a.jsonl",
            '{"a": 1, "y": true}\n',
            ["--task", "regression"],
            "a.jsonl:1: the regression target must be",
        ),
        ("a.data", '{"a": 1, "y": 0}\n', [], "a.data:1: the target column 'y' is not in the header"),
        ("a.csv", "a,y\n1,x\nfoo,y\n", [], "a.csv:3: feature 'a' is numeric (its first value) but has 'foo'"),
        ("a.jsonl", '{"a": "red", "y": 0}\n{"a": 7, "y": 1}\n', [], "a.jsonl:2: feature 'a' is nominal"),
        (
            "a.jsonl",
            '{"a": 1, "y": 0}\n{"a": 2, "y": NaN}\n',
            [],
            "a.jsonl:1: a record of lines 1-2 was refused",
        ),
        (
            "a.jsonl",
            '{"a": 1, "y": 0}\n{"a": 2, "y": NaN}\n',
            ["--batch-size", "1"],
            "a.jsonl:2: this record was",
        ),
    ],
)
def test_bad_input_names_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name, content, argv, message
):
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    assert main([str(path), "--target", "y", *argv]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("sgt-evaluate: error: ") and message in captured.err


def test_bad_utf8_names_the_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "a.jsonl"
    path.write_bytes(b'{"a": 1, "y": 0}\n{"a": "\xff", "y": 1}\n')
    assert main([str(path), "--target", "y"]) == 1
    assert "a.jsonl:2: not UTF-8 text" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--grace-period", "0"], "grace_period"),
        (["--delta", "2"], "delta"),
        (["--batch-size", "0"], "--batch-size must be >= 1"),
        (["--window", "0"], "--window must be >= 1"),
        (["--task", "ranking"], "invalid choice"),
        (["--plot", "/nonexistent-dir/curve.png"], "--plot: no such directory: /nonexistent-dir"),
    ],
)
def test_bad_arguments_are_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv, message
) -> None:
    path = write_csv(tmp_path / "data.csv", classification_rows(10))
    with pytest.raises(SystemExit) as exc:
        main([str(path), "--target", "label", *argv])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_plot_without_matplotlib_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # what an environment without the extra looks like
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    path = write_csv(tmp_path / "data.csv", classification_rows(10))
    with pytest.raises(SystemExit) as exc:
        main([str(path), "--target", "label", "--plot", str(tmp_path / "curve.png")])
    assert exc.value.code == 2
    assert "--plot needs matplotlib; install the plot extra" in capsys.readouterr().err
    assert not (tmp_path / "curve.png").exists()


def test_missing_file_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main([str(tmp_path / "nope.csv"), "--target", "y"])
    assert exc.value.code == 2 and "no such file" in capsys.readouterr().err


def test_console_script(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "sgt-evaluate"
    if not script.exists():
        pytest.skip("the sgt-evaluate console script is not installed in this environment")
    path = write_jsonl(tmp_path / "data.jsonl", regression_rows(500))
    done = subprocess.run(
        [str(script), str(path), "--target", "y", "--task", "regression"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["records"] == 500 and out["task"] == "regression" and out["mae"] > 0
