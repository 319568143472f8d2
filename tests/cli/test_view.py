"""`warmkernel view`: the console page, driven by a real browser (Debian's Chromium through
Playwright) and by plain HTTP for what a browser never shows: the refusals.

The tests share one daemon (and one logged-in page); each runs its own cells and reads only
them, so none depends on another's order.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx2
import pytest

from tests.cli.conftest import Cli
from tests.cli.test_nb import write_notebook
from tests.gates import Gate, opened_at_exit

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
PIXEL_PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
WAIT_MS = 60_000

pytestmark = pytest.mark.timeout(240)


def view_link(cli: Cli) -> str:
    done = cli("view", "--no-open")
    assert done.returncode == 0, done.stderr
    link = done.stdout.strip()
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/\?token=[\w-]{40,}", link), link
    return link


def run_cell(cli: Cli, code: str, *flags: str) -> int:
    """Run a cell through the CLI; its execution number."""
    done = cli("run", *flags, code)
    found = re.search(r"In \[(\d+)\]", done.stdout)
    assert found, done.stdout + done.stderr
    return int(found[1])


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        if os.environ.get("CI"):
            pytest.fail(f"{CHROMIUM} is missing: .ci/run installs Debian's chromium package")
        pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def page(browser: Any, daemon_cli: Cli) -> Iterator[Any]:
    """The console page, logged in with a link of `view`, following the newest execution."""
    from playwright.sync_api import expect

    tab = browser.new_page(viewport={"width": 1400, "height": 900})
    tab.set_default_timeout(WAIT_MS)
    expect.set_options(timeout=WAIT_MS)
    tab.goto(view_link(daemon_cli))
    expect(tab.locator("#connection")).to_have_text("live")
    yield tab
    tab.close()


def _sample_paths() -> list[tuple[str, str]]:
    """Every route of the page, as (method, path) with sample values in its parameters."""
    from warmkernel.faces.console import routes

    samples = {"{kernel}": "main", "{n:int}": "1", "{ordinal:int}": "1", "{name}": "console.js"}
    queries = {"/search": "?query=routes", "/lines": "?start=0&stop=5"}
    paths = []
    for route in routes(dict):
        path = route.path
        for pattern, value in samples.items():
            path = path.replace(pattern, value)
        path += next((query for end, query in queries.items() if path.endswith(end)), "")
        paths.extend((method, path) for method in sorted((route.methods or set()) - {"HEAD"}))
    return paths


def test_the_link_works_once_and_without_its_cookie_every_route_is_refused(daemon_cli: Cli) -> None:
    run_cell(daemon_cli, "print('routes')")
    link = view_link(daemon_cli)
    base = link.split("?")[0]
    origin = base.rstrip("/")
    paths = _sample_paths()
    assert len(paths) == 11 and ("POST", "/api/kernels/main/interrupt") in paths
    with httpx2.Client(base_url=base, trust_env=False, timeout=30) as anonymous:
        for method, path in paths:
            refused = anonymous.request(
                method, path, headers={"origin": origin, "content-type": "application/json"}
            )
            assert refused.status_code == 401, (method, path, refused.text)
        assert anonymous.get("/?token=not-a-token").status_code == 403

    with httpx2.Client(base_url=base, trust_env=False, timeout=30, follow_redirects=True) as browser:
        entered = browser.get(link)
        assert entered.status_code == 200 and "<title>warmkernel console</title>" in entered.text
        (cookie,) = entered.history[0].headers.get_list("set-cookie")
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie
        assert "script-src 'self'" in entered.headers["content-security-policy"]
        assert browser.get(link).status_code == 403, "a link works once"
        for method, path in paths:
            if method == "GET" and path != "/events":  # the event stream never ends
                assert browser.get(path).status_code == (404 if "/images/" in path else 200), path
        assert browser.get("/api/kernels/main/executions/1/lines?start=0&stop=5").json()["lines"] == [
            {"text": "routes", "stream": "stdout"}
        ]
        assert browser.get("/api/kernels/main/executions/x1").status_code == 404
        bad = browser.get("/api/kernels/main/executions/1/lines?start=-3")
        assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_arguments"
        assert browser.get("/api/kernels/gpu/variables").json()["error"]["message"].endswith("kernels: main")

        # The one action: a POST from the page's own origin only.
        interrupt = "/api/kernels/main/interrupt"
        json_body = {"content-type": "application/json"}
        assert browser.post(interrupt, content="{}", headers=json_body).status_code == 403
        foreign = browser.post(interrupt, content="{}", headers=json_body | {"origin": "http://evil.example"})
        assert foreign.status_code == 403
        other_port = browser.post(
            interrupt, content="{}", headers=json_body | {"origin": "http://127.0.0.1:1"}
        )
        assert other_port.status_code == 403
        allowed = browser.post(interrupt, content="{}", headers=json_body | {"origin": origin})
        assert allowed.status_code == 200 and allowed.json() == {"status": "idle", "execution": None}
        assert browser.get("/", headers={"host": "evil.example"}).status_code == 421

    beyond_loopback = daemon_cli("view", "--no-open", "--host", "0.0.0.0")
    assert beyond_loopback.returncode == 2 and "--allowed-host" in beyond_loopback.stderr
    elsewhere = daemon_cli("view", "--no-open", "--port", "1")
    assert elsewhere.returncode == 2 and f"already listens at {base}" in elsewhere.stderr


def test_view_opens_the_link_in_the_browser_that_BROWSER_names(daemon_cli: Cli, tmp_path: Path) -> None:
    opener = tmp_path / "opener"
    opener.write_text(f'#!/bin/sh\necho "$1" > {tmp_path / "opened"}\n')
    opener.chmod(0o755)
    done = subprocess.run(
        [sys.executable, "-m", "warmkernel", "view"],
        cwd=daemon_cli.workspace,
        env={**daemon_cli.env, "BROWSER": f"{opener} %s"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "opened").read_text().strip() == done.stdout.strip()
    assert "opened in your browser" in done.stderr
    assert urlsplit(done.stdout.strip()).port == urlsplit(view_link(daemon_cli)).port, "one page per daemon"


def test_view_without_a_browser_to_open_says_so(daemon_cli: Cli) -> None:
    graphical = ("BROWSER", "DISPLAY", "WAYLAND_DISPLAY")
    done = subprocess.run(
        [sys.executable, "-m", "warmkernel", "view"],
        cwd=daemon_cli.workspace,
        env={name: value for name, value in daemon_cli.env.items() if name not in graphical},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("warmkernel: no browser to open it here (no $BROWSER or display)")


def progress(first: Gate, then: Gate) -> str:
    """A progress line at step 0 until `first` opens, then at step 1 until `then` does."""
    return (
        "import sys\n"
        f"sys.stdout.write('\\rstep 0'); sys.stdout.flush()\n{first.wait}\n"
        f"sys.stdout.write('\\rstep 1'); sys.stdout.flush()\n{then.wait}\n"
    )


LAST_LINE_MOVED = """([first]) => {
    const last = [...document.querySelectorAll('#output .line .tx')].pop();
    return last !== undefined && /^step \\d+$/.test(last.textContent) && last.textContent !== first;
}"""


def test_the_page_loads_without_a_failed_request_or_a_console_error(browser: Any, daemon_cli: Cli) -> None:
    from playwright.sync_api import expect

    tab = browser.new_page()
    problems: list[str] = []
    tab.on("console", lambda message: message.type == "error" and problems.append(message.text))
    tab.on("response", lambda response: response.status >= 400 and problems.append(response.url))
    tab.goto(view_link(daemon_cli))
    expect(tab.locator("#connection")).to_have_text("live", timeout=WAIT_MS)
    tab.wait_for_load_state("networkidle")
    tab.close()
    assert problems == []


def test_the_page_follows_a_running_cells_progress_line_and_interrupts_it(
    page: Any, daemon_cli: Cli, gate: Gate, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    with opened_at_exit(tmp_path / "at-step-1") as held:
        number = run_cell(daemon_cli, progress(gate, held), "--timeout", "0.5")
        expect(page.locator("#title")).to_have_text(f"In [{number}]")
        expect(page.locator("#state")).to_have_text("running")
        last = page.locator("#output .line .tx").last
        expect(last).to_have_text(re.compile(r"^step \d+$"))
        first = last.text_content()
        gate.open()
        page.wait_for_function(LAST_LINE_MOVED, arg=[first])
        assert page.locator("#output .line").count() == 1, "a progress bar is one line"

        page.click("#interrupt")
        expect(page.locator("#state")).to_have_text("interrupted")
        expect(page.locator("#interrupt")).to_be_hidden()
        expect(page.locator(f"#executions .row:has-text('[{number}]') .state")).to_have_text("interrupted")
        expect(page.locator("#output .line.s-traceback.emphasis").last).to_contain_text("KeyboardInterrupt")


IMAGE_LOADED = """() => {
    const image = document.querySelector('#output .image-row img');
    return image !== null && image.complete && image.naturalWidth === 1;
}"""


def test_the_page_shows_images_coloured_tracebacks_variables_and_the_notebooks_stale_cells(
    page: Any, daemon_cli: Cli
) -> None:
    from playwright.sync_api import expect

    image_cell = (
        "import base64\nfrom IPython.display import Image, display\n"
        f"display(Image(data=base64.b64decode({PIXEL_PNG!r})))\nseen_on_page = 41\nprint('after the image')"
    )
    number = run_cell(daemon_cli, image_cell)
    expect(page.locator("#title")).to_have_text(f"In [{number}]")
    expect(page.locator("#output .image-row .tx")).to_have_text("[image 1: image/png 1x1, 70 bytes]")
    page.wait_for_function(IMAGE_LOADED)
    expect(page.locator("#output .line .tx").last).to_have_text("after the image")
    expect(page.locator("#variables")).to_contain_text("seen_on_page")

    number = run_cell(daemon_cli, "def broken():\n    raise ValueError('on purpose')\nbroken()")
    expect(page.locator("#title")).to_have_text(f"In [{number}]")
    expect(page.locator("#state")).to_have_text("error")
    expect(page.locator("#notes")).to_have_text("ValueError: on purpose")
    expect(page.locator("#output .s-traceback.emphasis .tx").last).to_have_text("ValueError: on purpose")

    write_notebook(daemon_cli.workspace / "page.ipynb", [("load", "a = 1"), ("use", "b = a + 1")])
    assert daemon_cli("nb", "status", "page.ipynb", "--kernel", "main").returncode == 0  # shown for main
    expect(page.locator("#notebook-name")).to_have_text("page.ipynb")
    expect(page.locator("#notebook tr")).to_have_count(3)
    expect(page.locator("#notebook .plan")).to_have_text("plan: load, use")


LINES_MATCH_THEIR_INDEX = """([fraction, total]) => {
    const lines = [...document.querySelectorAll('#output .line')];
    if (lines.length < 10) return false;
    const first = Number(lines[0].dataset.index);
    return lines.every((line) => line.querySelector('.tx').textContent === 'line ' + line.dataset.index)
        && Math.abs(first - fraction * total) < total / 50;
}"""


def test_a_million_line_execution_opens_at_its_end_scrolls_by_windows_and_is_searched(
    page: Any, daemon_cli: Cli
) -> None:
    from playwright.sync_api import expect

    total = 1_000_000
    flood = f"import sys\n_ = sys.stdout.write(''.join(f'line {{i}}\\n' for i in range({total})))"
    number = run_cell(daemon_cli, flood, "--timeout", "120")
    expect(page.locator("#title")).to_have_text(f"In [{number}]")
    expect(page.locator("#output .line .tx").last).to_have_text(f"line {total - 1}")
    expect(page.locator("#output-status")).to_contain_text("of 1,000,000")

    output = page.locator("#output")
    for fraction in (0.0, 0.5, 0.25, 0.9):
        output.evaluate(
            "(node, f) => { node.scrollTop = f * (node.scrollHeight - node.clientHeight); }", fraction
        )
        page.wait_for_function(LINES_MATCH_THEIR_INDEX, arg=[fraction, total])

    page.fill("#query", r"^line 77777\d$")
    page.fill("#context", "1")
    page.click("#search-form button[type=submit]")
    results = page.locator("#search-results")
    expect(results.locator(".summary").first).to_have_text("10 matching lines (regex)")
    expect(results.locator(".hit")).to_have_count(12)  # ten matches, one line of context at each end
    results.locator(".hit.match", has_text="line 777775").click()
    target = page.locator("#output .line[data-index='777775']")
    expect(target).to_have_class(re.compile(r"\bhighlight\b"))
    expect(target.locator(".tx")).to_have_text("line 777775")
    expect(target).to_be_in_viewport()
