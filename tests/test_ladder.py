"""`metabonk ladder` (issue 22, item 5): 2 agents x 1 game x 3 seeds write `ladder.json`,
`ladder.md` and `ladder.html` with best/worst videos; the page renders its table in a real
headless chromium (tests/browser.py) and sorts it; bad input is one line and writes nothing.
Ladders of run directories of every SB3-side trainer: tests/test_agent_runs.py."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from browser import dump_dom
from metabonk_gym.cli.main import app
from typer.testing import CliRunner

from metabonk_gym.agents.ladder import OUTPUTS, markdown
from metabonk_gym.agents.ranking import wilson

QUEST = "MetaBonk/BonkQuest-v0"
runner = CliRunner()


class Rows(HTMLParser):
    """The rendered ladder table's rows: each `tr.cell`'s cells by `data-key`, and its links."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[dict[str, str]] = []
        self.links: list[list[str]] = []
        self._key: str | None = None
        self.table: dict[str, str | None] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "table" and a.get("id") == "ladder":
            self.table = a
        if tag == "tr" and a.get("class") == "cell":
            self.rows.append({})
            self.links.append([])
        if tag == "td" and self.rows:
            self._key = a.get("data-key")
        if tag == "a" and self.rows and a.get("href"):
            self.links[-1].append(str(a["href"]))

    def handle_data(self, data: str) -> None:
        if self._key is not None and self.rows:
            self.rows[-1][self._key] = self.rows[-1].get(self._key, "") + data

    def handle_endtag(self, tag: str) -> None:
        if tag == "td":
            self._key = None


def rendered(page: Path, fragment: str = "") -> Rows:
    parser = Rows()
    parser.feed(dump_dom(page, fragment=fragment))
    return parser


@pytest.fixture(scope="module")
def ladder_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ladder") / "out"
    cli = runner.invoke(
        app,
        ["ladder", QUEST, "--agents", "random,scripted", "--episodes", "3", "--goal", "config"]
        + ["--max-steps", "120", "--out", str(out)],
    )
    assert cli.exit_code == 0, cli.output
    return out


def test_a_ladder_writes_json_markdown_html_and_videos(ladder_dir: Path) -> None:
    assert sorted(p.name for p in ladder_dir.iterdir()) == sorted([*OUTPUTS, "videos"])
    data = json.loads((ladder_dir / "ladder.json").read_text())
    assert data["seeds"] == [0, 1, 2] and data["goal"] == "config" and data["complete"]
    assert "rooms_visited" in data["scoring"][QUEST]["won_means"]
    assert data["command"] is None or data["command"].startswith("metabonk ladder")
    first, second = data["cells"]
    # the scripted expert leaves room 1 on every seed, random on none: ranked so
    assert (first["agent"], first["rank"], first["wins"]) == ("scripted", 1, 3)
    assert (second["agent"], second["rank"], second["wins"]) == ("random", 2, 0)
    assert first["win_ci95"] == pytest.approx(list(wilson(3, 3)))
    assert second["win_ci95"] == pytest.approx(list(wilson(0, 3)))
    lengths = [e["length"] for e in first["episode_results"]]
    assert first["steps_to_win"] == pytest.approx(sum(lengths) / 3)
    assert second["steps_to_win"] is None
    for cell in data["cells"]:  # same seeds and start for every agent
        assert cell["seeds"] == [0, 1, 2] and cell["state"] == "room1"
        for label in ("best", "worst"):
            video = ladder_dir / cell["videos"][label]
            assert video.is_file() and video.stat().st_size > 1000, video
    table = (ladder_dir / "ladder.md").read_text()
    assert "| MetaBonk/BonkQuest-v0 | 1 | scripted | scripted | 100% | 44%-100% |" in table
    assert "[best](videos/" in table and markdown(data) == table


@pytest.mark.browser
def test_the_page_renders_its_table_in_a_real_browser(ladder_dir: Path) -> None:
    page = ladder_dir / "ladder.html"
    html = page.read_text()
    assert "http://" not in html and "https://" not in html  # self-contained: nothing fetched
    assert "<tr" not in html.split("<script")[0]  # rows come from the page's script
    shown = rendered(page)
    assert shown.table.get("data-rendered") == "2"
    assert [r["agent"] for r in shown.rows] == ["scripted", "random"]
    assert shown.rows[0]["win_rate"] == "100%" and shown.rows[1]["win_rate"] == "0%"
    for links in shown.links:  # each cell links its best and worst video, which exist
        assert len(links) == 2 and all((ladder_dir / link).is_file() for link in links)
    ascending = rendered(page, "sort=mean_return")
    returns = [float(r["mean_return"]) for r in ascending.rows]
    assert returns == sorted(returns) and ascending.table.get("data-sort") == "mean_return"
    descending = rendered(page, "sort=-mean_return")
    assert [r["agent"] for r in descending.rows] == [r["agent"] for r in ascending.rows][::-1]


@pytest.mark.parametrize(
    ("agents", "env", "message"),
    [
        ("random,nobody", QUEST, "unknown agent 'nobody'"),
        ("random,think:/nope/m.gguf", QUEST, "strategist file not found"),
        ("random,random", QUEST, "more than once"),
        ("random", "MetaBonk/Nope-v0", "Nope-v0"),
        (",", QUEST, "names no agent"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(
    agents: str, env: str, message: str, tmp_path: Path
) -> None:
    out = tmp_path / "ladder"
    cli = runner.invoke(
        app, ["ladder", env, "--agents", agents, "--episodes", "1"] + ["--out", str(out)]
    )
    assert cli.exit_code == 2, cli.output
    assert len(cli.output.strip().splitlines()) == 1 and message in cli.output, cli.output
    assert not out.exists()


def test_the_goal_is_said_and_checked(tmp_path: Path) -> None:
    out = tmp_path / "ladder"
    cli = runner.invoke(
        app,
        ["ladder", QUEST, "--agents", "scripted", "--episodes", "1", "--goal", "game"]
        + ["--max-steps", "40", "--no-video", "--out", str(out)],
    )
    assert cli.exit_code == 0, cli.output
    assert "won scores the game's own win" in re.sub(r"\s+", " ", cli.output)
    data = json.loads((out / "ladder.json").read_text())
    assert data["cells"][0]["wins"] == 0 and data["cells"][0]["videos"] == {}
    assert not (out / "videos").exists()
    bad = runner.invoke(
        app, ["ladder", QUEST, "--agents", "random", "--goal", "room9", "--out", str(out / "x")]
    )
    assert bad.exit_code == 2 and "--goal must be one of config, game" in bad.output


@pytest.mark.llm
def test_a_model_thinker_with_its_follower_is_a_ladder_agent(tmp_path: Path) -> None:
    """`think:M.gguf`: a real (tiny, random-weight) GGUF strategist in llama-cpp-python with the
    directive follower, ranked beside random on the same seeds."""
    from metabonk_gym.think.testing import write_tiny_llama

    model = write_tiny_llama(tmp_path / "tiny.gguf")
    out = tmp_path / "ladder"
    cli = runner.invoke(
        app,
        ["ladder", QUEST, "--agents", f"random,think:{model}", "--episodes", "2"]
        + ["--max-steps", "20", "--no-video", "--out", str(out)],
    )
    assert cli.exit_code == 0, cli.output
    cells = {c["agent"]: c for c in json.loads((out / "ladder.json").read_text())["cells"]}
    thinker = cells[f"think:{model}"]
    assert thinker["kind"] == "think" and thinker["seeds"] == [0, 1]
    assert [e["length"] for e in thinker["episode_results"]] == [20, 20]


def test_a_stopped_ladder_keeps_the_cells_it_finished(tmp_path: Path) -> None:
    """Ctrl-C after the first cell: the outputs hold that cell, marked incomplete."""
    from metabonk_gym.agents.ladder import run_ladder

    def stop(cell: dict) -> None:
        raise KeyboardInterrupt

    out = tmp_path / "ladder"
    with pytest.raises(KeyboardInterrupt):
        run_ladder(
            [QUEST], ["random", "scripted"], out, episodes=1, videos=False, on_cell=stop,
            overrides={"max_episode_steps": 10},
        )  # fmt: skip
    data = json.loads((out / "ladder.json").read_text())
    assert data["complete"] is False and [c["agent"] for c in data["cells"]] == ["random"]
    assert "**Incomplete**" in (out / "ladder.md").read_text()


def test_eval_ladder_files_are_ladders_and_old_files_still_read(tmp_path: Path) -> None:
    """`eval --ladder FILE.json` writes the format of `metabonk ladder`'s ladder.json (so
    `markdown` renders it); a file of the older `{"entries": [...]}` form is read and kept."""
    from metabonk_gym.agents.evaluate import evaluate
    from metabonk_gym.agents.ranking import read_ladder

    path = tmp_path / "ladder.json"
    old = {"agent": "scripted", "env_id": QUEST, "state": "room1", "reward": "default", "seed": 0}
    old |= {"episodes": 2, "win_rate": 1.0, "mean_return": 5.0, "std_return": 0.0}
    path.write_text(json.dumps({"entries": [old]}))
    report = evaluate(QUEST, "random", episodes=1, overrides={"max_episode_steps": 20}, ladder=path)
    assert report["ladder_rank"] == 2
    data = json.loads(path.read_text())
    assert data["format"] == 1 and [c["agent"] for c in data["cells"]] == ["scripted", "random"]
    assert [c["rank"] for c in read_ladder(path)] == [1, 2]
    assert "| random |" in markdown(data)
    path.write_text("[1, 2]")
    with pytest.raises(Exception, match="is not a metabonk ladder"):
        read_ladder(path)
