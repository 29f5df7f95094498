"""Notebook 06 in a real browser: JupyterLab headless on 127.0.0.1, Debian's Chromium driven by
playwright, the notebook run, the explorer's block-size slider dragged, the occupancy it shows
read before and after.

    make browser-test        # installs playwright (PyPI) and chromium (apt) where missing

Nothing downloads a browser: playwright is pointed at /usr/bin/chromium. The notebook runs on a
copy (JupyterLab saves outputs into what it opens), in the simulator, with the solutions.
Each of the figure's three panels must be drawn (ink on its pixels, read back from the image the
browser decoded), fit its output area, and redraw when the block size moves; text alone proves
none of that. A screenshot of the explorer after the move is kept in figures/browser/ (CI has
no artefact store: `make browser-test` leaves it there for a person to look at).
"""

import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from kernellab.course import target

sync_api = pytest.importorskip("playwright.sync_api", reason="make browser-test installs playwright")
CHROMIUM = Path(os.environ.get("KERNELLAB_CHROMIUM", "/usr/bin/chromium"))
if not CHROMIUM.exists():
    pytest.skip(f"no Chromium at {CHROMIUM} (make browser-test installs Debian's)", allow_module_level=True)

NOTEBOOK = "06_occupancy.ipynb"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
SCREENSHOT = target.ROOT / "figures" / "browser" / "occupancy_explorer.png"
OCCUPANCY = re.compile(r"occupancy (\d+)%")
RUN_TIMEOUT_MS = 120_000


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def jupyter_lab(tmp_path):
    """A JupyterLab server on a free local port, serving a copy of the notebooks; its lab URL."""
    (tmp_path / "notebooks").mkdir()
    shutil.copy(target.ROOT / "notebooks" / NOTEBOOK, tmp_path / "notebooks" / NOTEBOOK)
    port, token = free_port(), "kernellab-browser-test"
    # No "get notified about Jupyter news?" toast over the explorer, and no fetch of the news.
    notification = tmp_path / "settings" / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    notification.parent.mkdir(parents=True)
    notification.write_text('{"fetchNews": "false", "checkForUpdates": false}')
    env = {**os.environ, "KERNELLAB_DEVICE": "sim", "KERNELLAB_TARGET": "solutions",
           "JUPYTER_CONFIG_DIR": str(tmp_path / "config"), "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
           "JUPYTERLAB_SETTINGS_DIR": str(tmp_path / "settings"),
           "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "workspaces")}
    log = open(tmp_path / "jupyter.log", "w")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={tmp_path}",
         "--expose-app-in-browser", "--LabApp.news_url=None",
         "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
         "--LabApp.extension_manager=readonly", *(["--allow-root"] if os.geteuid() == 0 else [])],
        env=env, stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"JupyterLab did not start:\n{(tmp_path / 'jupyter.log').read_text()[-3000:]}")
                time.sleep(0.3)
        yield f"{base}/lab/tree/notebooks/{NOTEBOOK}?token={token}"
    finally:
        server.terminate()
        server.wait(timeout=20)
        log.close()


SHOWN = ("(previous) => { const out = document.querySelector('.widget-interact .jp-OutputArea');"
         " const line = out && out.innerText.match(/occupancy \\d+%/);"
         " return line && line[0] !== previous && out.querySelector('img'); }")


# Each of the figure's three panels, below its title band, as the browser decoded the figure:
# the share of its pixels that are ink (not the white background), a checksum of where the ink
# is, and whether the image fits the explorer (a figure wider than it is cut off at its edge).
PANELS = """(img) => {
  const canvas = document.createElement('canvas');
  canvas.width = img.naturalWidth; canvas.height = img.naturalHeight;
  const context = canvas.getContext('2d');
  context.drawImage(img, 0, 0);
  const pixels = context.getImageData(0, 0, canvas.width, canvas.height).data;
  const ink = [0, 0, 0], where = [0, 0, 0], counted = [0, 0, 0];
  for (let y = Math.floor(canvas.height * 0.2); y < canvas.height; y += 2) {
    for (let x = 0; x < canvas.width; x += 2) {
      const panel = Math.min(2, Math.floor(3 * x / canvas.width)), at = (y * canvas.width + x) * 4;
      counted[panel] += 1;
      if (pixels[at] + pixels[at + 1] + pixels[at + 2] < 720) {
        ink[panel] += 1;
        where[panel] = (where[panel] * 31 + x * 7 + y * 13 + pixels[at]) % 1000003;
      }
    }
  }
  const shown = img.getBoundingClientRect(), area = img.closest('.widget-interact').getBoundingClientRect();
  return {ink: ink.map((n, i) => n / counted[i]), where, width: canvas.width, shown: shown.width,
          area: area.width, clipped: shown.right > Math.min(area.right, window.innerWidth) + 1};
}"""
MIN_INK = 0.005     # a drawn panel (axes, grid, curve, marker) inks well over 0.5% of its pixels


def panels(explorer) -> dict:
    return explorer.locator(".jp-OutputArea img").first.evaluate(PANELS)


def shown_occupancy(page, explorer, previous: str = "") -> int:
    """The occupancy percentage the explorer prints above its figure, once it differs from
    `previous` and the figure is drawn."""
    page.wait_for_function(SHOWN, arg=previous, timeout=RUN_TIMEOUT_MS)
    text = explorer.locator(".jp-OutputArea").first.inner_text()
    return int(OCCUPANCY.search(text).group(1))


def test_moving_the_block_size_slider_changes_the_occupancy_shown(jupyter_lab):
    phases, started = {}, time.perf_counter()

    def phase(name):
        phases[name] = time.perf_counter() - started - sum(phases.values())

    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1500, "height": 1000})
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        try:
            page.goto(jupyter_lab)
            page.wait_for_function("window.jupyterapp?.shell.currentWidget?.sessionContext?.session?.kernel",
                                   timeout=60_000)
            phase("JupyterLab and the kernel up")
            page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
            explorer = page.locator(".widget-interact").first
            explorer.wait_for(timeout=RUN_TIMEOUT_MS)
            explorer.scroll_into_view_if_needed()
            before = shown_occupancy(page, explorer)
            drawn_before = panels(explorer)
            phase("notebook run to the explorer")
            block = explorer.locator(".widget-slider").filter(has_text="block")
            before_value = block.locator(".widget-readout").inner_text()

            handle = block.locator(".noUi-handle").bounding_box()
            track = block.locator(".noUi-target").bounding_box()
            y = handle["y"] + handle["height"] / 2
            page.mouse.move(handle["x"] + handle["width"] / 2, y)
            page.mouse.down()
            page.mouse.move(track["x"] + track["width"], y, steps=10)
            page.mouse.up()
            after = shown_occupancy(page, explorer, previous=f"occupancy {before}%")
            after_value = block.locator(".widget-readout").inner_text()
            page.wait_for_function("window.jupyterapp.shell.currentWidget.sessionContext.session.kernel"
                                   ".status === 'idle'", timeout=RUN_TIMEOUT_MS)
            page.wait_for_timeout(500)          # the last redraw's output replaced in the page
            drawn_after = panels(explorer)
            phase("slider moved and redrawn")
            explorer.screenshot(path=str(SCREENSHOT))
            errors = page.locator("[data-mime-type='application/vnd.jupyter.stderr'] .jp-RenderedText, "
                                  ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.error']")
            raised = [text[:300] for text in errors.all_inner_texts() if "Error" in text]
        except Exception:       # what the page showed when it failed
            page.screenshot(path=str(SCREENSHOT.with_name("failure.png")), full_page=True)
            raise
        browser.close()
    print(f"block {before_value} -> {after_value}: occupancy {before}% -> {after}%; "
          + ", ".join(f"{name} {seconds:.0f} s" for name, seconds in phases.items())
          + f"; screenshot {SCREENSHOT}")
    assert not raised, f"a notebook cell raised: {raised}"
    for drawn in (drawn_before, drawn_after):
        assert min(drawn["ink"]) > MIN_INK, f"a panel is blank: ink shares {drawn['ink']}"
        assert not drawn["clipped"], f"the figure does not fit its output area: {drawn}"
    moved = [a != b for a, b in zip(drawn_before["where"], drawn_after["where"])]
    assert all(moved), f"panels that did not redraw for the new block size: {moved}"
    assert before_value == "128" and after_value == "1024", "the slider did not move to its end"
    assert (before, after) == (75, 50), "40 registers at block 128 give 75% on an H200, at 1024 50%"
