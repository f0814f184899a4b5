"""`rearank view` output in a real headless Chromium (Debian chromium + chromium-driver, selenium).

Loads the page from a file URL, clicks a query and a window, checks the DOM (model text shown as text,
never run), checks the browser console has no error, and saves a screenshot to results/view-screenshot.png.
"""

import json
import re
import shutil
from pathlib import Path

import pytest

from rearank.cli import main
from tests.conftest import ROOT, absent

pytestmark = pytest.mark.slow
ARTIFACTS = ROOT / "results"
EVIL = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2"> [2] > [1]'


def _chromium():
    """A selenium Chrome driver on the system chromium; a missing browser fails on CI, skips elsewhere."""
    missing = [name for name in ("chromium", "chromedriver") if shutil.which(name) is None]
    try:
        from selenium import webdriver
    except ImportError:
        missing.append("selenium (pip)")
    if missing:
        absent(f"headless browser check needs {', '.join(missing)} (`make test-slow` installs them)")
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1440,2200"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=webdriver.ChromeService(executable_path=shutil.which("chromedriver")),
                            options=options)


@pytest.fixture
def page(dl19, tmp_path, monkeypatch):
    """A view of an oracle run on three dl19 queries, one reasoning replaced by markup, with a benchmark plot."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    monkeypatch.setenv("REARANK_DATA", str(dl19.parents[1]))
    bench = tmp_path / "bench"
    folder = bench / "dl19"
    folder.mkdir(parents=True)
    run = folder / "run.trec"
    assert main(["rerank", "--dataset", "dl19", "--backend", "oracle", "--max-queries", "3", "--top-k", "40",
                 "--no-progress", "--output", str(run)]) == 0
    run.with_name("run.trec.traces.jsonl").rename(folder / "traces.jsonl")
    run.with_name("run.trec.stats.json").rename(folder / "stats.json")
    lines = (folder / "traces.jsonl").read_text().splitlines()
    second = json.loads(lines[4])  # query 2, window 2 (three windows per query for a top-40)
    second["raw_output"] = EVIL
    lines[4] = json.dumps(second)
    (folder / "traces.jsonl").write_text("\n".join(lines) + "\n")
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.bar(["BM25", "oracle"], [50.6, 89.2])
    ax.set_title("nDCG@10")
    fig.savefig(bench / "ndcg10.png", dpi=80)
    plt.close(fig)
    out = tmp_path / "view.html"
    assert main(["view", str(folder), "--dataset", "dl19", "--output", str(out)]) == 0
    return out, second["qid"]


def test_page_clicks_through_a_query_and_a_window_without_console_errors(page):
    from selenium.webdriver.common.by import By

    path, qid = page
    browser = _chromium()
    try:
        browser.get(path.as_uri())
        queries = browser.find_elements(By.CSS_SELECTOR, "#queries button")
        assert len(queries) == 3
        assert len(browser.find_elements(By.CSS_SELECTOR, "#plots img")) == 1
        target = browser.find_element(By.CSS_SELECTOR, f'#queries button[data-qid="{qid}"]')
        target.click()
        assert "active" in target.get_attribute("class")
        assert browser.find_element(By.ID, "qtitle").text == f"Query {qid}"
        windows = browser.find_elements(By.CSS_SELECTOR, "#windows button")
        assert len(windows) == 3  # schedule(40, 20, 10): (20, 40), (10, 30), (0, 20)
        windows[1].click()
        assert "active" in windows[1].get_attribute("class")
        reasoning = browser.find_element(By.ID, "reasoning")
        assert reasoning.text == EVIL  # shown as text
        assert browser.execute_script("return window.__pwned") is None  # and never run
        assert not browser.find_elements(By.CSS_SELECTOR, "#window script, #window img")
        chips = browser.find_elements(By.CSS_SELECTOR, "#permutation > span")
        assert len(chips) == 20  # "[i] relevance docid", the docid the window presented at i
        assert all(re.fullmatch(r"\[\d+\] (\d|–)\s*\d+", c.text) for c in chips), [c.text for c in chips[:3]]
        moved = browser.find_elements(By.CSS_SELECTOR, "#final tr.up, #final tr.down")
        assert moved, "the oracle moves passages: some rows must be highlighted"
        windows[2].click()
        assert "ok" in browser.find_element(By.CSS_SELECTOR, "#window .status").text
        windows[1].click()
        errors = [entry for entry in browser.get_log("browser") if entry["level"] in ("SEVERE", "ERROR")]
        assert errors == []
        browser.execute_script("window.scrollTo(0, 0)")
        ARTIFACTS.mkdir(exist_ok=True)
        assert browser.save_screenshot(str(ARTIFACTS / "view-screenshot.png"))
        assert Path(ARTIFACTS / "view-screenshot.png").stat().st_size > 10_000
    finally:
        browser.quit()
