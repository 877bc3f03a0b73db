"""docs/benchmarks.md is generated from the figure records in docs/figures/ and stays so: the page
regenerates byte-identical, every record follows the schema, the README's headline table quotes
the records' headline figures, and the links of the README and the generated pages resolve."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from metabonk_gym.bench import report
from metabonk_gym.bench.figures import FiguresError, load_group, load_groups, put_figures

ROOT = Path(__file__).resolve().parent.parent
FIGURES = ROOT / "docs" / "figures"
PAGE = ROOT / "docs" / "benchmarks.md"


def test_benchmarks_md_regenerates_byte_identical() -> None:
    want = report.render(load_groups(FIGURES))
    assert PAGE.read_text(encoding="utf-8") == want, "stale: run `metabonk bench report`"


def test_every_figure_carries_value_target_met_command_seeds_machine_date() -> None:
    groups = load_groups(FIGURES)
    assert len(groups) >= 15 and sum(len(g.figures) for g in groups) >= 60
    for group in groups:
        for figure in group.figures:
            assert figure.command and figure.machine and re.match(r"\d{4}-\d\d-\d\d$", figure.date)
            assert figure.target is not None or figure.met is None, (group.group, figure.id)
        if group.data:
            assert (ROOT / group.data).is_file(), group.data
    assert 8 <= sum(f.headline is not None for g in groups for f in g.figures) <= 12


def test_a_changed_record_makes_the_page_stale_and_check_says_so(tmp_path: Path) -> None:
    figures = tmp_path / "figures"
    shutil.copytree(FIGURES, figures)
    page = tmp_path / "benchmarks.md"
    shutil.copy(PAGE, page)
    assert not report.stale(figures, page)
    raw = json.loads((figures / "env.json").read_text())
    raw["figures"][0]["text"] = "9,999 vs 8,511 frames/s = 1.17x"
    (figures / "env.json").write_text(json.dumps(raw))
    assert report.stale(figures, page)
    assert report.main(["--check", "--figures", str(figures), "--page", str(page)]) == 1
    assert report.main(["--figures", str(figures), "--page", str(page)]) == 0
    assert "9,999 vs 8,511" in page.read_text() and not report.stale(figures, page)


def test_a_bad_record_is_one_error_line_and_nothing_is_written(tmp_path: Path) -> None:
    figures = tmp_path / "figures"
    figures.mkdir()
    (figures / "demo.json").write_text(
        json.dumps({"group": "demo", "title": "T", "figures": [{"id": "x", "name": "n"}]})
    )
    page = tmp_path / "benchmarks.md"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "metabonk_gym.bench.report",
            "--figures",
            str(figures),
            "--page",
            str(page),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 2 and not page.exists()
    assert done.stderr.strip().splitlines() == [
        "error: demo: figure 0 (x): 'date' must be a non-empty string"
    ]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"met": True}, "met without a target"),
        ({"value": "fast"}, "value must be a number or null"),
        ({"date": "Nov 26"}, "date must be YYYY-MM-DD"),
        ({"seeds": ["a"]}, "seeds must be"),
        ({"speed": 1}, "unknown key 'speed'"),
    ],
)
def test_the_schema_refuses(tmp_path: Path, change: dict, message: str) -> None:
    figure = {
        "id": "x",
        "name": "n",
        "value": 1.0,
        "command": "c",
        "machine": "m",
        "date": "2026-11-28",
    }
    path = tmp_path / "demo.json"
    path.write_text(json.dumps({"group": "demo", "title": "T", "figures": [figure | change]}))
    with pytest.raises(FiguresError, match=message):
        load_group(path)


def test_a_bench_writes_its_record_in_the_schema(tmp_path: Path) -> None:
    from metabonk_gym.cli.bench import env_figures

    result = {"env_fps": 6000.0, "raw_core_fps": 8000.0, "env_vs_raw": 0.75}
    path = tmp_path / "env.json"
    group = put_figures(path, env_figures(result), command="metabonk bench env", title="GBA envs")
    again = load_group(path)
    assert again == group and again.title == "GBA envs" and again.figures[0].met is False
    assert again.figures[0].text == "6,000 vs 8,000 frames/s = 0.75x" and again.figures[0].machine


def test_the_readme_quotes_every_headline_figure() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for row in report.headline_rows(load_groups(FIGURES)).splitlines():
        assert row in readme, f"README's headline table lacks: {row}"


def _links(path: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    return re.findall(r"\]\(([^)\s]+)\)", text)


DOCS = ["README.md", "DEVELOPERS.md", "CHANGELOG.md", "gba/README.md"]
DOCS += sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md"))


@pytest.mark.parametrize("doc", DOCS)
def test_links_resolve(doc: str) -> None:
    path = ROOT / doc
    for link in _links(path):
        if re.match(r"[a-z]+:", link) or link.startswith("#"):
            continue
        target, _, anchor = link.partition("#")
        resolved = (path.parent / target).resolve()
        assert resolved.exists(), f"{doc}: {link}"
        if anchor and resolved.suffix == ".md":
            text = resolved.read_text(encoding="utf-8")
            assert f'id="{anchor}"' in text or anchor in _anchors(text), f"{doc}: {link}"


def _anchors(text: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces as dashes."""
    out = set()
    for heading in re.findall(r"^#+ (.+)$", text, re.M):
        out.add(re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-"))
    return out


def test_put_figures_replaces_one_figure_and_keeps_the_rest(tmp_path: Path) -> None:
    from metabonk_gym.bench.megabonk_ppo_from_bc import figure_record

    path = tmp_path / "megabonk-video.json"
    shutil.copy(FIGURES / "megabonk-video.json", path)
    before = load_group(path)
    run = {
        "ppo_steps": 1000,
        "random": {"mean": 50.0},
        "bc": {"mean": 21.0},
        "ppo_from_bc": {"mean": 60.25},
    }
    command = "python -m metabonk_gym.bench.megabonk_ppo_from_bc C O"
    after = put_figures(path, [figure_record(run)], command=command)
    assert [f.id for f in after.figures] == [f.id for f in before.figures]
    new = next(f for f in load_group(path).figures if f.id == "ppo-from-bc")
    assert new.value == 60.2 and new.text == "clone 21.0 s -> PPO 60.2 s, random 50.0 s"
    assert new.command.endswith("C O") and new.date != "2026-11-26"
    assert [f for f in after.figures if f.id != "ppo-from-bc"] == [
        f for f in before.figures if f.id != "ppo-from-bc"
    ]


def test_megabonk_video_records_agree_with_the_raw_output_they_came_from() -> None:
    from metabonk_gym.bench.megabonk_video import figure_records

    raw = json.loads((FIGURES / "raw" / "megabonk-video.json").read_text())
    records = {f.id: f for f in load_group(FIGURES / "megabonk-video.json").figures}
    computed = figure_records(raw)
    assert len(computed) == 4
    for row in computed:
        assert (records[row["id"]].value, records[row["id"]].met) == (row["value"], row["met"])


def test_a_bench_run_puts_its_figures_into_a_copy_of_the_records(tmp_path: Path) -> None:
    """`metabonk bench tiles --figures` on the real core: its three figures replace the record's,
    the other figures stay, and the page generated from the copy shows the new run."""
    from metabonk_gym.cli.main import app
    from typer.testing import CliRunner

    figures = tmp_path / "figures"
    shutil.copytree(FIGURES, figures)
    before = {f.id: f for f in load_group(figures / "wrappers.json").figures}
    args = ["bench", "tiles", "--steps", "40", "--figures", str(figures / "wrappers.json")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    after = {f.id: f for f in load_group(figures / "wrappers.json").figures}
    assert set(after) == set(before)
    changed = {i for i in after if after[i] != before[i]}
    assert changed == {"env-step-bonkquest", "tiles-vram-bonkquest", "tiles-pixels-bonkquest"}
    assert after["tiles-vram-bonkquest"].command.endswith("--steps 40 --seed 0")
    page = tmp_path / "benchmarks.md"
    assert report.main(["--figures", str(figures), "--page", str(page)]) == 0
    assert after["tiles-vram-bonkquest"].shown_value() in page.read_text()


def test_report_outside_the_repository_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "benchmarks.md"
    assert report.main(["--figures", str(tmp_path / "nowhere"), "--page", str(page)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "repository root" in err[0]
    assert not page.exists()


def test_integrate_records_fail_a_search_that_did_not_find_its_address() -> None:
    from metabonk_gym.bench.integrate_speed import figure_records

    result = {"step_ms_changed": 6.0, "step_ms_max": 8.0, "step_wall_ms_changed": 9.0}
    result |= {"speedup_increased": 500.0, "seed1 BonkQuest hp steps": 6}
    result |= {"seed1 BonkQuest worst steps (<= 8)": 6, "seed1 BonkQuest suggest x rank": 1}
    result |= {"seed2 BonkArena xp steps": "NOT FOUND (9)", "seed2 BonkArena suggest y rank": 2}
    rows = {r["id"]: r for r in figure_records(result)}
    search = rows["scripted-search-filters"]
    assert search["met"] is False and search["value"] is None
    assert search["text"] == "seed1 BonkQuest: hp 6; seed2 BonkArena: xp NOT FOUND (9)"
    assert rows["suggest-rank"]["met"] is True and rows["suggest-rank"]["value"] == 2
    assert rows["ram-filter-step"]["met"] is True and "tile-classes" not in rows


def test_a_bench_given_a_file_that_is_not_a_record_says_so_and_leaves_it(tmp_path: Path) -> None:
    bad = tmp_path / "env.json"
    bad.write_text("[1]")
    args = [sys.executable, "-m", "metabonk_gym.cli.main", "bench", "env", "--steps", "10"]
    args += ["--rounds", "1", "--no-vector"]
    args += ["--no-retro-env", "--figures", str(bad)]
    done = subprocess.run(args, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1] == f"error: {bad}: not a figure record file"
    assert bad.read_text() == "[1]"
