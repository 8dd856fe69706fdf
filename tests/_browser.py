"""Headless Chromium (Debian's package) driven over the DevTools protocol on a pipe
(`--remote-debugging-pipe`: JSON messages ended by a NUL byte, the browser reading fd 3
and writing fd 4), so a test can run JavaScript in a real page without WebDriver or a
websocket package."""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import subprocess
import time
from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")


def _above_9(fd: int) -> int:
    """fd moved to a number above 9 (close-on-exec; pass_fds hands it on)."""
    high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return high


FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1600,1200", "--remote-debugging-pipe")


class Chromium:
    """One headless browser with one page (tab); `evaluate` runs JavaScript in it."""

    def __init__(self, profile: Path, timeout: float = 60):
        profile.mkdir(parents=True, exist_ok=True)
        self.timeout = timeout
        self.log = profile.parent / f"{profile.name}.log"
        to_browser, self._w = os.pipe()
        self._r, from_browser = os.pipe()
        # the browser expects the pipe on fds 3 and 4: bash moves them there (dash takes no
        # fd above 9), from above 9 so that neither move overwrites the other one's source
        to_browser, from_browser = (_above_9(fd) for fd in (to_browser, from_browser))
        move = f'exec "$@" 3<&{to_browser} 4>&{from_browser} {to_browser}<&- {from_browser}>&-'
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                ["bash", "-c", move, "bash", str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}",
                 "about:blank"],
                pass_fds=(to_browser, from_browser), stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT)
        os.close(to_browser)
        os.close(from_browser)
        self._buf, self._id, self.events = b"", 0, []
        try:
            target = self.call("Target.createTarget", url="about:blank")["targetId"]
            self.session = self.call("Target.attachToTarget", targetId=target,
                                     flatten=True)["sessionId"]
            self.call("Page.enable", session=self.session)
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ protocol
    def _read(self, deadline: float) -> dict:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                raise TimeoutError(f"chromium: no answer ({self.log}: {self.tail()})")
            if select.select([self._r], [], [], min(left, 1.0))[0]:
                chunk = os.read(self._r, 1 << 20)
                if not chunk:
                    raise EOFError(f"chromium closed its pipe ({self.log}: {self.tail()})")
                self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method: str, session: str | None = None, wait: float | None = None,
             **params) -> dict:
        """Send a command, return its result; events that arrive meanwhile are kept."""
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params}
        if session:
            msg["sessionId"] = session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + (wait or self.timeout)
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]
            self.events.append(reply)

    def wait_event(self, method: str) -> dict:
        deadline = time.monotonic() + self.timeout
        while True:
            for i, ev in enumerate(self.events):
                if ev.get("method") == method:
                    return self.events.pop(i)
            self.events.append(self._read(deadline))

    # ------------------------------------------------------------------ the page
    def open(self, url: str) -> None:
        """Load url and wait for its load event (scripts run, images fetched)."""
        self.events.clear()
        nav = self.call("Page.navigate", session=self.session, url=url)
        assert "errorText" not in nav, nav
        self.wait_event("Page.loadEventFired")

    def evaluate(self, expression: str, wait: float | None = None):
        """The value of a JavaScript expression in the page (a promise is awaited)."""
        r = self.call("Runtime.evaluate", session=self.session, wait=wait,
                      expression=expression, awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"JavaScript: {r['exceptionDetails']}")
        return r["result"].get("value")

    def screenshot(self, path: Path) -> Path:
        """The page as a PNG: the window, and beyond it where the document scrolls."""
        shot = self.call("Page.captureScreenshot", session=self.session, format="png",
                         captureBeyondViewport=True)
        path.write_bytes(base64.b64decode(shot["data"]))
        return path

    def tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def close(self) -> None:
        if self._w < 0:
            return
        try:
            if self.proc.poll() is None:
                close = {"id": self._id + 1, "method": "Browser.close"}
                os.write(self._w, json.dumps(close).encode() + b"\0")
                self.proc.wait(timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        finally:
            os.close(self._w)
            os.close(self._r)
            self._w = self._r = -1

    def __enter__(self) -> "Chromium":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# The views of a `snakemake --report` page (its React app), each with every <img> on the
# page once it has loaded: the front page, then per category and subcategory each
# result, shown as its eye button shows it, and its caption (the info button). The
# pixel sum (RGBA) is null where the browser refuses to read an image back: a file of
# the .zip report, loaded from file://.
REPORT_VIEWS_JS = r"""
(async () => {
  const sleep = ms => new Promise(r => setTimeout(r, ms));
  async function settle(ready, what) {
    for (let t = 0; t < 1000 && !ready(); t++) await sleep(10);
    if (!ready()) throw new Error(`the report did not show ${what} within 10 s`);
    await new Promise(r => requestAnimationFrame(() => setTimeout(r, 0)));  // a frame later
    await Promise.all([...document.images].map(i => i.complete ? null : new Promise(r => {
      i.addEventListener("load", r, {once: true});
      i.addEventListener("error", r, {once: true});
    })));
  }
  const sums = new Map();  // by src: a result's image stays in view beside its caption
  function pixelSum(img) {
    if (!img.naturalWidth) return null;
    const src = img.getAttribute("src");
    if (!sums.has(src)) sums.set(src, readPixelSum(img));
    return sums.get(src);
  }
  function readPixelSum(img) {
    const c = document.createElement("canvas");
    c.width = img.naturalWidth;
    c.height = img.naturalHeight;
    const g = c.getContext("2d");
    g.drawImage(img, 0, 0);
    let data;
    try { data = g.getImageData(0, 0, c.width, c.height).data; } catch (e) { return null; }
    let s = 0;
    for (let k = 0; k < data.length; k++) s += data[k];
    return s;
  }
  // is_result: the image is the file of the result in view (the report's own URI of it)
  const images = (path = null) => [...document.images].map(i => ({
    alt: i.alt, src: i.getAttribute("src").slice(0, 48), width: i.naturalWidth,
    height: i.naturalHeight, pixel_sum: pixelSum(i),
    is_result: path !== null && i.getAttribute("src") === results[path].data_uri}));
  const views = [];
  await settle(() => document.querySelector(".prose"), "its front page");
  views.push({view: "front page", path: null, images: images()});
  // as a reader goes: the menu, a category, its subcategory (React keeps a mounted
  // list when only its category changes, so each list is opened from the menu), then
  // each result's eye and info buttons
  const rows = () => document.querySelectorAll("nav table tbody tr");
  const item = label => [...document.querySelectorAll("nav li > a")].find(
    a => a.textContent.trim() === label);
  const shows = uri => [...document.images].some(i => i.getAttribute("src") === uri);
  const listed = (cat, sub) => app.state.navbarMode === "subcategory"
    && app.state.category === cat && app.state.subcategory === sub && rows().length > 0;
  async function openList(cat, sub) {
    app.setView({navbarMode: "menu"});
    await settle(() => app.state.navbarMode === "menu" && item(cat), "the menu");
    item(cat).click();
    await settle(() => app.state.category === cat && (app.state.navbarMode === "subcategory"
      || (app.state.navbarMode === "category" && item(sub))), `category ${cat}`);
    if (app.state.navbarMode === "category") item(sub).click();
    await settle(() => listed(cat, sub), `the list of ${cat} / ${sub}`);
  }
  for (const cat of Object.keys(categories).sort()) {
    for (const sub of Object.keys(categories[cat]).sort()) {
      await openList(cat, sub);
      for (let k = 0; k < rows().length; k++) {
        const eye = rows()[k].querySelector('a[iconname="eye"]');
        if (!eye.hasAttribute("download")) {  // a file the browser shows, not one it downloads
          const before = app.state.resultPath;
          eye.click();
          await settle(() => {
            const p = app.state.resultPath;
            return p !== before && (app.state.content !== "img" || shows(results[p].data_uri));
          }, `result ${k + 1} of ${cat} / ${sub}`);
          const path = app.state.resultPath;
          views.push({view: `${cat} / ${sub}: result`, path, images: images(path)});
        }
        rows()[k].querySelector('a[iconname="information-circle"]').click();
        await settle(() => app.state.navbarMode === "resultinfo",
                     `the caption of result ${k + 1} of ${cat} / ${sub}`);
        const info = app.state.resultPath;
        views.push({view: `${cat} / ${sub}: caption`, path: info, images: images()});
        app.setView({navbarMode: "subcategory", category: cat, subcategory: sub});  // back
        await settle(() => listed(cat, sub), `the list of ${cat} / ${sub}`);
      }
    }
  }
  return views;
})()
"""


def report_views(browser: Chromium, page: Path, screenshot: Path | None = None) -> list[dict]:
    """Open a report's page and walk its views (REPORT_VIEWS_JS); screenshot: a PNG of
    the front page, its figures in view, written there first."""
    browser.open(page.resolve().as_uri())
    if screenshot is not None:
        browser.evaluate("""(async () => {
          const sleep = ms => new Promise(r => setTimeout(r, ms));
          for (let t = 0; t < 1000 && !document.querySelector(".prose"); t++) await sleep(10);
          document.querySelector(".prose img")?.scrollIntoView();
          await sleep(300);
        })()""")
        browser.screenshot(screenshot)
    return browser.evaluate(REPORT_VIEWS_JS, wait=300)
