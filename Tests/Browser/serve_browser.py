#!/usr/bin/env python3
"""The browser test of `kvtool serve`: headless Debian chromium driven by Selenium 4.

Run by the Swift test (which starts the server) as

    python3 Tests/Browser/serve_browser.py --url 'http://127.0.0.1:PORT/?token=T' --kvtool PATH \
        --root ROOT --group GROUP --expected-dashboard expected.json --screenshots DIR \
        --collection dailyRecords --timeline-collection notes

The keys, counts and search results the page must show are first asked of the API directly (urllib, with
the token header), so the browser checks compare the page with the server; the dashboard is compared with
--expected-dashboard (the `periods` array of /api/dashboard, computed by the Swift test from the store).
The timeline check writes five keys `browser-NONCE-i` into --timeline-collection with `kvtool put` and
a PNG to Files/TrainerImages/test.png with `kvtool files put`. The hostile-content check writes markup
into a key, a value and a file name, and .html and .svg files into Files/hostile/, and checks that
none of it runs; the other-port check serves a page from another port of 127.0.0.1 that tries to read,
write, follow the event stream and load an image, and checks that all of it is refused.

Exit 0 when every check passes; otherwise one line `FAIL: what, expected X, got Y` per failed check and
exit 1. Figures are printed as lines starting with `[serve-browser] `. Every wait has a timeout and the
whole run is cut at 85 s. The page's data-testid attributes are listed at the top of app.js.
"""
import argparse
import datetime
import http.server
import json
import os
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import zlib

from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

DEADLINE_SECONDS = 85
TIMELINE_LATENCY_LIMIT_MS = 1000
failures = []


def log(message):
    print(f"[serve-browser] {message}", flush=True)


def fail(what, expected, got):
    line = f"FAIL: {what}, expected {expected}, got {got}"
    failures.append(line)
    print(line, flush=True)


def check(condition, what, expected, got):
    if not condition:
        fail(what, expected, got)
    return bool(condition)


class WaitTimeout(Exception):
    pass


class Deadline(Exception):
    pass


def wait_for(function, timeout, what, poll=0.01):
    """`function()`'s first truthy value, polled every `poll` s; WaitTimeout after `timeout` s."""
    end = time.monotonic() + timeout
    last = None
    while True:
        try:
            value = function()
            if value:
                return value
            last = value
        except WebDriverException as error:  # a stale element, a page between documents
            last = error.msg
        if time.monotonic() >= end:
            raise WaitTimeout(f"{what} (after {timeout} s; last {last!r})")
        time.sleep(poll)


def png_gradient(width, height):
    """A real RGB PNG: a gradient, built with zlib and struct."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    rows = b"".join(
        b"\x00" + bytes(v for x in range(width) for v in (x * 255 // (width - 1), y * 255 // (height - 1), 160))
        for y in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows, 9)) + chunk(b"IEND", b"")


class Run:
    def __init__(self, args):
        self.args = args
        parts = urllib.parse.urlsplit(args.url)
        self.base = f"{parts.scheme}://{parts.netloc}"
        self.token = urllib.parse.parse_qs(parts.query).get("token", [""])[0]
        self.driver = None
        self.today = None
        self.truth = None
        self.nonce = f"{os.getpid()}-{int(time.time()) % 100000}"  # the timeline check's keys are browser-NONCE-i

    # ------------------------------------------------------------ plumbing

    def js(self, script, *args):
        return self.driver.execute_script(script, *args)

    def shot(self, name):
        self.js("window.scrollTo(0, 0)")
        path = os.path.join(self.args.screenshots, name)
        self.driver.save_screenshot(path)

    def go(self, hash_):
        self.js("location.hash = arguments[0]", hash_)

    def rows(self, testid, attribute):
        return self.js(
            "return [...document.querySelectorAll(`[data-testid=${arguments[0]}]`)].map(e => e.dataset[arguments[1]])",
            testid, attribute)

    def error_text(self):
        return self.js("const e = document.querySelector('[data-testid=error]'); return e ? e.textContent : null")

    def kvtool(self, *words, author=None):
        command = [self.args.kvtool, "--root", self.args.root, "--group", self.args.group]
        if author:
            command += ["--author", author]
        command += list(words)
        started = time.monotonic()
        result = subprocess.run(command, capture_output=True, text=True, timeout=20)
        ended = time.monotonic()
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} exited {result.returncode}: {result.stderr.strip()[:300]}")
        return started, ended

    def http_status(self, path):
        try:
            with urllib.request.urlopen(self.base + path, timeout=5) as response:
                return response.status
        except urllib.error.HTTPError as error:
            return error.code

    def api(self, path):
        request = urllib.request.Request(self.base + path, headers={"X-KVTool-Token": self.token})
        with urllib.request.urlopen(request, timeout=5) as response:
            return json.load(response)

    def start_browser(self):
        options = webdriver.ChromeOptions()
        options.binary_location = "/usr/bin/chromium"
        for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1000",
                         "--no-first-run", "--no-default-browser-check", "--disable-extensions",
                         "--disable-background-networking", "--disable-component-update", "--hide-scrollbars"):
            options.add_argument(argument)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        started = time.monotonic()
        self.driver = webdriver.Chrome(service=Service(executable_path="/usr/bin/chromedriver"), options=options)
        self.driver.set_page_load_timeout(20)
        self.driver.set_script_timeout(10)
        log(f"browser start {(time.monotonic() - started) * 1000:.0f} ms")

    def learn_truth(self):
        """What the page must show, asked of the API directly (urllib, token header), and checked against the
        checklist dataset: the year ending `today`, its first day kept."""
        try:
            self.today = datetime.date.fromisoformat(self.api("/api/dashboard")["today"])
        except Exception as error:  # noqa: BLE001
            self.today = datetime.date(2026, 11, 21)
            log(f"no dashboard 'today' ({error}); assuming {self.today}")
        name = urllib.parse.quote(self.args.collection)
        entries = {entry["name"]: entry for entry in self.api("/api/catalog")["entries"]}
        count = entries.get(self.args.collection, {}).get("count")
        page1 = self.api(f"/api/collection?name={name}&limit=50")
        page2 = self.api(f"/api/collection?name={name}&limit=50&after={page1['next']}") if page1["next"] else {"entries": []}
        month = self.today.replace(day=1).isoformat()
        in_range = self.api(f"/api/collection?name={name}&limit=500&from={month}&through={self.today.isoformat()}")
        self.truth = {"count": count, "page1": [e["key"] for e in page1["entries"]],
                      "page2": [e["key"] for e in page2["entries"]], "range": [e["key"] for e in in_range["entries"]]}
        t = self.truth
        log(f"API: {self.args.collection} has {count} entries; page 1 {t['page1'][:1]}…, page 2 starts {t['page2'][:1]}, "
            f"{month}…{self.today} has {len(t['range'])} entries")
        first_day = (self.today - datetime.timedelta(days=364)).isoformat()
        check(t["page1"][:1] == [first_day], f"the API's first key of {self.args.collection}", first_day, t["page1"][:1])
        check(len(t["page1"]) == 50 and len(t["page2"]) > 0, f"the API's first two pages of {self.args.collection}",
              "50 rows and more", f"{len(t['page1'])} and {len(t['page2'])}")
        check(t["range"][:1] == [month] and t["range"][-1:] == [self.today.isoformat()],
              f"the API's range {month} through {self.today}", f"{month}…{self.today}", f"{t['range'][:1]}…{t['range'][-1:]}")

    # ------------------------------------------------------------ checks

    def check_no_token(self):
        for path in ("/", "/api/catalog", "/api/catalog?token=wrong"):
            status = self.http_status(path)
            check(status == 403, f"GET {path} without the token", 403, status)
        self.driver.get(self.base + "/")
        text = wait_for(lambda: self.js("return document.body && document.body.innerText.trim()"), 5,
                        "the no-token page's text")
        status = self.js("const n = performance.getEntriesByType('navigation')[0]; return n ? n.responseStatus : null")
        check(status == 403, "the browser's status for / without the token", 403, status)
        lowered = text.lower()
        check(any(word in lowered for word in ("denied", "forbidden", "token", "403")),
              "the no-token page's text", "a 403 / access denied message", repr(text[:120]))
        check(not self.js("return !!document.querySelector('[data-testid=catalog-table]')"),
              "the no-token page", "no catalog", "a catalog table")
        self.shot("403.png")

    def check_page_load(self):
        started = time.monotonic()
        self.driver.get(self.args.url)
        returned = time.monotonic()
        wait_for(lambda: self.js("return document.querySelectorAll('[data-testid=catalog-row]').length"), 15,
                 "catalog rows")
        shown = time.monotonic()
        timing = self.js("""const n = performance.getEntriesByType('navigation')[0];
            return {ttfb: n.responseStart, dcl: n.domContentLoadedEventEnd, load: n.loadEventEnd};""")
        log(f"page load {(shown - started) * 1000:.0f} ms to catalog rows (driver.get {(returned - started) * 1000:.0f} ms; "
            f"navigation: first byte {timing['ttfb']:.0f} ms, DOMContentLoaded {timing['dcl']:.0f} ms, "
            f"load {timing['load']:.0f} ms)")
        counts = dict(zip(self.rows("catalog-row", "name"), self.rows("catalog-row", "count")))
        name = self.args.collection
        want = str(self.truth["count"])
        check(counts.get(name) == want, f"the page's catalog count of {name}", want, counts.get(name, "no such row"))
        check(self.args.timeline_collection in counts, f"the catalog lists {self.args.timeline_collection}",
              "a row", sorted(counts))
        self.shot("catalog.png")

    def collection_page(self, what, first_key, rows, timeout=8):
        """Waits until the collection table's first key is `first_key` with `rows` rows."""
        def ready():
            keys = self.rows("collection-row", "key")
            return keys and keys[0] == first_key and len(keys) == rows
        try:
            wait_for(ready, timeout, what)
            return True
        except WaitTimeout:
            keys = self.rows("collection-row", "key")
            fail(what, f"{rows} rows from {first_key}",
                 f"{len(keys)} rows from {keys[0] if keys else None} (error box: {self.error_text()})")
            return False

    def check_browse(self):
        name = self.args.collection
        truth = self.truth
        first = truth["page1"][0]
        link = self.driver.find_element(By.CSS_SELECTOR, f"[data-testid=catalog-row][data-name='{name}'] a")
        link.click()
        self.collection_page(f"{name}'s first page", first, len(truth["page1"]))
        size = Select(self.driver.find_element(By.CSS_SELECTOR, "[data-testid=page-size]"))
        size.select_by_value("100")
        self.collection_page(f"{name}'s first page of 100", first, min(100, truth["count"]))
        size.select_by_value("50")
        self.collection_page(f"{name}'s first page of 50", first, len(truth["page1"]))
        keys = self.rows("collection-row", "key")
        check(keys == truth["page1"], f"{name}'s first page's keys", f"the API's {truth['page1'][0]}…{truth['page1'][-1]}",
              f"{keys[0] if keys else None}…{keys[-1] if keys else None} ({len(keys)})")
        self.driver.find_element(By.CSS_SELECTOR, "[data-testid=next-page]").click()
        self.collection_page(f"{name}'s second page (Next)", truth["page2"][0], len(truth["page2"]))
        self.driver.find_element(By.CSS_SELECTOR, "[data-testid=prev-page]").click()
        self.collection_page(f"{name}'s first page again (Previous)", first, len(truth["page1"]))

        today = self.today
        month = today.replace(day=1)
        mode = Select(self.driver.find_element(By.CSS_SELECTOR, "[data-testid=search-mode]"))
        mode.select_by_value("range")
        for testid, value in (("search-from", "not-a-day"), ("search-through", today.isoformat())):
            field = self.driver.find_element(By.CSS_SELECTOR, f"[data-testid={testid}]")
            field.clear()
            field.send_keys(value)
        self.driver.find_element(By.CSS_SELECTOR, "[data-testid=search-submit]").click()
        try:
            message = wait_for(self.error_text, 5, "the error box")
            log(f"bad key shown as: {message.strip()}")
        except WaitTimeout:
            fail("a range from 'not-a-day'", "a visible error box", "none")
        field = self.driver.find_element(By.CSS_SELECTOR, "[data-testid=search-from]")
        field.clear()
        field.send_keys(month.isoformat())
        self.driver.find_element(By.CSS_SELECTOR, "[data-testid=search-submit]").click()
        if self.collection_page(f"range {month.isoformat()} through {today.isoformat()}", truth["range"][0], len(truth["range"])):
            check(self.error_text() is None, "the error box after a good search", "gone", self.error_text())
        self.shot("collection.png")

    def check_timeline(self):
        self.go("#timeline")
        try:
            wait_for(lambda: self.js("const e = document.querySelector('[data-testid=status]');"
                                     "return e && e.dataset.state === 'live' && e.offsetParent !== null"), 10, "live")
        except WaitTimeout:
            state = self.js("const e = document.querySelector('[data-testid=status]'); return e && e.dataset.state")
            fail("the timeline's connection", "live", state)
            return
        after_exit, after_start, in_page = [], [], []
        row_js = ("return !!document.querySelector("
                  "`[data-testid=timeline-row][data-key=\"${CSS.escape(arguments[0])}\"]`)")
        for i in range(5):
            key = f"browser-{self.nonce}-{i}"
            started, exited = self.kvtool("put", self.args.timeline_collection, key, '{"text": "hello"}',
                                          author="browser-test")
            try:
                wait_for(lambda: self.js(row_js, key), 5, f"the timeline row of {key}", poll=0.01)
            except WaitTimeout:
                fail(f"the timeline row of {key}", "within 5 s", "none")
                continue
            # Seen by this script: an upper bound that adds WebDriver's 10 ms polls and round trips
            # (printed only); the check is on the page's own timing below.
            seen = time.monotonic()
            after_exit.append((seen - exited) * 1000)
            after_start.append((seen - started) * 1000)
            log(f"timeline latency {after_exit[-1]:.0f} ms after the writer exited "
                f"({after_start[-1]:.0f} ms after it started)")
            row = self.js("const r = document.querySelector(`[data-testid=timeline-row][data-key=\"${CSS.escape(arguments[0])}\"]`);"
                          "return {...r.dataset}", key)
            # The commit's own time (recorded by the writer) to the row joining the page (the page's clock):
            # one machine, one clock, and no WebDriver round trip in between.
            try:
                in_page.append(float(row.get("shown")) - float(row.get("committed")))
            except (TypeError, ValueError):
                fail(f"the timeline row of {key}", "data-committed and data-shown", row)
            check(row.get("author") == "browser-test" and row.get("name") == self.args.timeline_collection,
                  f"the timeline row of {key}", f"author browser-test, name {self.args.timeline_collection}",
                  f"author {row.get('author')}, name {row.get('name')}")
        if after_exit:
            log(f"timeline latency after exit: min {min(after_exit):.0f} ms, median {statistics.median(after_exit):.0f} ms, "
                f"max {max(after_exit):.0f} ms; after start: min {min(after_start):.0f} ms, "
                f"median {statistics.median(after_start):.0f} ms, max {max(after_start):.0f} ms")
        if in_page:
            log(f"timeline latency from the commit to its row in the page: min {min(in_page):.0f} ms, "
                f"median {statistics.median(in_page):.0f} ms, max {max(in_page):.0f} ms")
            check(max(in_page) <= TIMELINE_LATENCY_LIMIT_MS, "timeline latency from the commit to its row",
                  f"<= {TIMELINE_LATENCY_LIMIT_MS} ms", f"{max(in_page):.0f} ms")
        first = self.js("const r = document.querySelector('[data-testid=timeline-row]'); return r && r.dataset.key")
        check(first == f"browser-{self.nonce}-4", "the timeline's top row", f"browser-{self.nonce}-4 (newest first)", first)

        Select(self.driver.find_element(By.CSS_SELECTOR, "[data-testid=filter-author]")).select_by_value("browser-test")
        visible = self.js("return [...document.querySelectorAll('[data-testid=timeline-row]')]"
                          ".filter(r => r.offsetParent !== null).map(r => r.dataset.author)")
        others = [author for author in visible if author != "browser-test"]
        check(len(visible) >= 5 and not others, "rows visible with author filter browser-test",
              ">= 5 rows, all by browser-test", f"{len(visible)} rows, others: {sorted(set(others))}")
        self.shot("timeline.png")

    def search_prefix(self, prefix):
        """Searches the collection view by key prefix, as a user would: the form's mode, field and button."""
        wait_for(lambda: self.js("return !!document.querySelector('[data-testid=view-collection] [data-testid=search-form]')"),
                 5, "the search form")
        Select(self.driver.find_element(By.CSS_SELECTOR, "[data-testid=search-mode]")).select_by_value("prefix")
        field = self.driver.find_element(By.CSS_SELECTOR, "[data-testid=search-prefix]")
        field.clear()
        field.send_keys(prefix)
        self.driver.find_element(By.CSS_SELECTOR, "[data-testid=search-submit]").click()

    def check_prefix(self):
        """A prefix search in the timeline collection, which now holds the timeline check's keys."""
        prefix = f"browser-{self.nonce}-"
        self.go(f"#collection/{self.args.timeline_collection}")
        self.search_prefix(prefix)
        if self.collection_page(f"prefix {prefix} in {self.args.timeline_collection}", f"{prefix}0", 5):
            value = self.js("return document.querySelector('[data-testid=collection-row] pre').textContent")
            check("hello" in value, f"the value of {prefix}0", '{"text": "hello"}', repr(value[:80]))

    def check_files(self):
        with tempfile.TemporaryDirectory() as directory:
            source = os.path.join(directory, "file.png")
            with open(source, "wb") as file:
                file.write(png_gradient(96, 96))
            self.kvtool("files", "put", "TrainerImages/test.png", source)
        self.go("#files/TrainerImages")
        script = ("const i = document.querySelector('img[data-testid=file-image][data-path=\"TrainerImages/test.png\"]');"
                  "return i && i.complete ? i.naturalWidth : null")
        try:
            width = wait_for(lambda: self.js(script), 8, "the image to load")
        except WaitTimeout:
            width = self.js(script)
        check(width == 96, "TrainerImages/test.png's naturalWidth", 96,
              f"{width} (error box: {self.error_text()})")
        crumbs = self.js("const b = document.querySelector('[data-testid=breadcrumbs]'); return b && b.textContent")
        check(crumbs and "TrainerImages" in crumbs, "the breadcrumbs", "Files / TrainerImages", crumbs)
        self.shot("files.png")
        # Files/Shared/ replicates (the fixture): each file's state on this device, with a refusal's reason.
        self.go("#files/Shared")
        wait_for(lambda: self.js("return document.querySelectorAll('[data-testid=replicated-row]').length"), 8,
                 "the replicated files' rows")
        states = dict(zip(self.rows("replicated-row", "path"), self.rows("replicated-row", "state")))
        want = {"Shared/a-old.txt": "missing", "Shared/b-new.txt": "present", "Shared/c-waiting.txt": "waiting_to_upload"}
        check(states == want, "the replicated files' states on #files/Shared", want, states)
        problem = self.js("const r = document.querySelector('[data-testid=replicated-row][data-path=\"Shared/c-waiting.txt\"]');"
                          "return r && r.querySelector('[data-testid=replicated-problem]').textContent")
        check(problem and "too_large" in problem, "the refused upload's reason", "too_large: …", problem)

    @staticmethod
    def hostile(where):
        """Markup that, if the page ever parsed it as HTML, would run and leave its mark in localStorage."""
        return (f"<img src=x onerror=\"localStorage.setItem('pwned','{where}')\">"
                f"<script>localStorage.setItem('pwned','{where}')</script>")

    def check_hostile_content(self):
        """Keys, values and file names that are markup, and .html and .svg files in Files/: the page shows
        them as text, the server serves the files as text or as downloads, and no script of theirs runs."""
        self.js("localStorage.removeItem('pwned')")
        key = self.hostile("key")
        self.kvtool("put", self.args.timeline_collection, key, json.dumps({"text": self.hostile("value")}))
        with tempfile.TemporaryDirectory() as directory:
            files = {"hostile/" + self.hostile("name").replace("/", "_") + ".txt": "plain text\n",
                     "hostile/evil.html": "<!doctype html><h1>evil</h1>" + self.hostile("html"),
                     "hostile/evil.svg": "<svg xmlns='http://www.w3.org/2000/svg' onload=\"localStorage.setItem('pwned','svg')\">"
                                         "<script>localStorage.setItem('pwned','svg-script')</script></svg>"}
            for index, (path, text) in enumerate(files.items()):
                source = os.path.join(directory, f"{index}")
                with open(source, "w", encoding="utf-8") as file:
                    file.write(text)
                self.kvtool("files", "put", path, source)
        planted = "document.querySelectorAll('img[src=\"x\"], script:not([src])').length"
        # The key and value in the collection's page (found by a prefix search), and in the timeline, as text.
        self.go(f"#collection/{self.args.timeline_collection}")
        self.search_prefix("<img")
        try:
            shown = wait_for(lambda: key in (self.rows("collection-row", "key") or []), 8, "the hostile key's row")
        except WaitTimeout:
            shown = False
        check(shown, "the hostile key, shown as text in its collection", repr(key[:40]),
              f"rows {[k[:30] for k in (self.rows('collection-row', 'key') or [])][:8]}")
        check(self.js(f"return {planted}") == 0, "elements made from the hostile key or value", 0, self.js(f"return {planted}"))
        self.go("#timeline")
        time.sleep(0.3)
        check(self.js(f"return {planted}") == 0, "elements made from the timeline's hostile rows", 0, self.js(f"return {planted}"))
        # The names in the Files/ listing, as text.
        self.go("#files/hostile")
        try:
            names = wait_for(lambda: self.js("return document.body.innerText.includes('evil.svg') && document.body.innerText"),
                             8, "the hostile/ listing")
        except WaitTimeout:
            names = ""
        check(self.hostile("name")[:20] in (names or ""), "the hostile file name, shown as text", self.hostile("name")[:20], repr((names or "")[:120]))
        check(self.js(f"return {planted}") == 0, "elements made from the hostile file name", 0, self.js(f"return {planted}"))
        self.shot("hostile.png")
        # The files themselves, opened as a user would: text, never a document that runs.
        for path in ("hostile/evil.html", "hostile/evil.svg"):
            self.driver.get(self.base + "/api/file?path=" + urllib.parse.quote(path))
            kind = self.js("return document.contentType")
            check(kind == "text/plain", f"{path} opened in the browser", "text/plain", kind)
        self.driver.get(self.base + "/")
        wait_for(lambda: self.js("return document.querySelectorAll('[data-testid=catalog-row]').length > 0"), 8, "the page again")
        mark = self.js("return localStorage.getItem('pwned')")
        check(mark is None, "a hostile script's mark in localStorage", None, mark)

    def check_other_port(self):
        """A page served from another port of 127.0.0.1 (same site: the browser sends it the cookie) can
        read nothing, write nothing, follow no event stream and load no image of the server's."""
        target = self.base
        page = """<!doctype html><meta charset="utf-8"><title>other port</title><body><script>
const T = %s, out = {};
async function attempt(name, body) { try { out[name] = await body(); } catch (e) { out[name] = "blocked"; } }
(async () => {
  await attempt("read", async () => { const r = await fetch(T + "/api/catalog", {credentials: "include"}); return "read " + r.status + " " + (await r.text()).slice(0, 40); });
  await attempt("write", async () => { const r = await fetch(T + "/api/put", {method: "POST", mode: "no-cors", credentials: "include",
      headers: {"Content-Type": "text/plain"}, body: JSON.stringify({collection: "notes", key: "from-another-port", value: {text: "x"}})}); return r.type; });
  await attempt("writeJSON", async () => { const r = await fetch(T + "/api/put", {method: "POST", credentials: "include",
      headers: {"Content-Type": "application/json"}, body: JSON.stringify({collection: "notes", key: "from-another-port-json", value: {text: "x"}})}); return "read " + r.status; });
  out.events = await new Promise(done => { const s = new EventSource(T + "/api/events", {withCredentials: true});
      s.addEventListener("hello", () => { s.close(); done("hello"); }); s.onerror = () => { s.close(); done("error"); };
      setTimeout(() => { s.close(); done("timeout"); }, 4000); });
  out.image = await new Promise(done => { const i = new Image(); i.onload = () => done("loaded " + i.naturalWidth);
      i.onerror = () => done("error"); i.src = T + "/api/file?path=TrainerImages/test.png"; });
  document.body.dataset.result = JSON.stringify(out);
})();
</script></body>""" % json.dumps(target)

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                body = page.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        other = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=other.serve_forever, daemon=True).start()
        try:
            # The server's page first, so that the browser holds its cookie.
            self.driver.get(self.args.url)
            wait_for(lambda: self.js("return document.querySelectorAll('[data-testid=catalog-row]').length > 0"), 8, "the page")
            cookies = [c["name"] for c in self.driver.get_cookies()]
            check(any(name.startswith("kvtool_token_") for name in cookies), "the page's cookie", "kvtool_token_PORT", cookies)
            self.driver.get(f"http://127.0.0.1:{other.server_address[1]}/")
            result = json.loads(wait_for(lambda: self.js("return document.body.dataset.result || null"), 15, "the other port's page"))
        finally:
            other.shutdown()
            # Back to the server's page, for the checks after this one.
            self.driver.get(self.args.url)
            wait_for(lambda: self.js("return document.querySelectorAll('[data-testid=catalog-row]').length > 0"), 8, "the page")
        log(f"a page of another port of 127.0.0.1: {result}")
        check(result.get("read") == "blocked", "another port's page reading /api/catalog", "blocked (no CORS)", result.get("read"))
        check(result.get("writeJSON") == "blocked", "another port's page posting JSON", "blocked", result.get("writeJSON"))
        check(result.get("events") == "error", "another port's page following /api/events", "error", result.get("events"))
        check(result.get("image") == "error", "another port's page loading an image of Files/", "error", result.get("image"))
        notes = self.api(f"/api/collection?name={urllib.parse.quote(self.args.timeline_collection)}&prefix=from-another-port")
        keys = [entry.get("key") for entry in notes.get("entries", [])]
        check(keys == [], "keys another port's page tried to write", [], keys)

    def check_dashboard(self):
        expected = json.load(open(self.args.expected_dashboard))
        if isinstance(expected, dict):
            expected = expected["periods"]
        self.go("#dashboard")
        bars = wait_for(lambda: self.js("""return [...document.querySelectorAll('[data-testid=dashboard-chart] rect[data-period]')]
            .map(r => ({period: r.dataset.period, category: r.dataset.category, value: r.dataset.value,
                        trend: r.dataset.trend, height: parseFloat(r.getAttribute('height'))}))"""),
                        10, "dashboard bars")
        wanted = 0
        for period in expected:
            for category in period["categories"]:
                if category["average"] is None:
                    continue
                wanted += 1
                what = f"dashboard bar {period['period']}/{category['category']}"
                matches = [bar for bar in bars
                           if bar["period"] == period["period"] and bar["category"] == category["category"]]
                if not check(len(matches) == 1, what, "exactly one <rect>", f"{len(matches)}"):
                    continue
                bar = matches[0]
                try:
                    value = float(bar["value"])
                except (TypeError, ValueError):
                    value = None
                check(value is not None and abs(value - category["average"]) <= 1e-12, f"{what} data-value",
                      repr(category["average"]), bar["value"])
                check(bar["trend"] == category["trend"], f"{what} data-trend", category["trend"], bar["trend"])
            mine = sorted(((float(bar["value"]), bar["height"], bar["category"]) for bar in bars
                           if bar["period"] == period["period"]))
            for (v1, h1, c1), (v2, h2, c2) in zip(mine, mine[1:]):
                ordered = h2 > h1 if v2 > v1 else abs(h2 - h1) < 1e-9
                check(ordered, f"dashboard bar heights in {period['period']}",
                      f"{c2} ({v2:.4f}) taller than {c1} ({v1:.4f})", f"heights {h2:.2f} and {h1:.2f}")
        check(len(bars) == wanted, "dashboard bars", f"{wanted} (one per non-null average)", len(bars))
        log(f"dashboard: {len(bars)} bars checked")
        self.shot("dashboard.png")

    def check_tables(self):
        for tab, testid in (("consumers", "consumers-table"), ("snapshots", "snapshots-table"), ("readers", "readers-table")):
            self.go(f"#{tab}")
            try:
                wait_for(lambda: self.js(f"return !!document.querySelector('[data-testid=view-{tab}] "
                                         f":is([data-testid={testid}], [data-testid=error])')"), 8, f"the {tab} view")
            except WaitTimeout:
                fail(f"the {tab} tab", f"a {testid}", "nothing after 8 s")
                continue
            error = self.error_text()
            check(error is None, f"the {tab} tab", "no error box", repr(error))
            rows = self.js(f"return document.querySelectorAll('[data-testid={testid}] tbody tr').length")
            log(f"{tab}: {rows} rows")
            if tab == "readers":
                stamp = lambda: self.js("const s = document.querySelector('[data-testid=readers-refreshed]');"
                                        "return s && s.textContent")
                first = wait_for(stamp, 3, "the readers' refresh time")
                try:
                    wait_for(lambda: stamp() != first, 3.5, "a refresh", poll=0.1)
                except WaitTimeout:
                    fail("the readers tab's auto-refresh", "a new refresh within 3.5 s", repr(first))
            self.shot(f"{tab}.png")
        # The sync tab: the container's sync status, or a notice where no process has synced it.
        self.go("#sync")
        try:
            shown = wait_for(lambda: self.js("const v = document.querySelector('[data-testid=view-sync] "
                                             ":is([data-testid=sync-table], [data-testid=sync-unavailable], [data-testid=error])');"
                                             "return v && v.dataset.testid"), 8, "the sync view")
            check(shown in ("sync-table", "sync-unavailable"), "the sync tab", "its status or its notice", shown)
            log(f"sync: {shown}")
        except WaitTimeout:
            fail("the sync tab", "its status or its notice", "nothing after 8 s")

    def check_tabs_and_plain_answers(self):
        """The tabs are the server's (its route table's views, in order); a tab the page has no drawing
        for shows its route's answer as indented text, markup in it never parsed."""
        tabs = self.js("return [...document.querySelectorAll('[data-testid=tabs] a')].map((a) => a.dataset.tab)")
        expected = ["catalog", "collection", "defaults", "files", "timeline", "consumers", "sync", "snapshots", "readers", "dashboard"]
        check(tabs == expected, "the tabs", expected, tabs)
        # As if the page had no drawing for the snapshots tab (a view added to the server's table alone).
        self.js("delete views.snapshots")
        self.go("#consumers")
        self.go("#snapshots")
        script = ("const p = document.querySelector('[data-testid=view-snapshots] [data-testid=answer]');"
                  "return p && p.textContent")
        try:
            text = wait_for(lambda: self.js(script), 8, "the snapshots answer")
        except WaitTimeout:
            text = self.js(script)
        answer = json.loads(text) if text else None
        check(isinstance(answer, dict) and "snapshots" in answer and "problems" in answer,
              "the snapshots tab without its drawing", "its answer, indented", repr(text)[:200])
        check(text is not None and "\n  " in text, "the answer's layout", "indented by two spaces", repr(text)[:80])

    def check_problem(self):
        """A co-tenant writes garbage into the history: the server sends `event: problem`, the page
        shows it in the timeline's status, and once the garbage is gone the next commit makes it live."""
        self.go("#timeline")
        status_js = "const e = document.querySelector('[data-testid=status]'); return e && [e.dataset.state, e.textContent]"
        try:
            wait_for(lambda: (self.js(status_js) or [None])[0] == "live", 10, "live")
        except WaitTimeout:
            fail("the timeline before the problem", "live", self.js(status_js))
            return
        garbage = "18446744073709551000"
        self.kvtool("put", "_history", garbage, '"garbage"', "--force")
        try:
            # The next commit with history makes the server read past it.
            self.kvtool("put", self.args.timeline_collection, f"problem-{self.nonce}", '{"text": "x"}')
            try:
                wait_for(lambda: (self.js(status_js) or [None])[0] == "problem", 10, "problem")
            except WaitTimeout:
                fail("the timeline's status after garbage in the history", "problem", self.js(status_js))
                return
            state, text = self.js(status_js)
            check("history unreadable" in text and garbage in text, "the problem shown", f"history unreadable … {garbage}", text)
            self.shot("timeline-problem.png")
        finally:
            self.kvtool("delete", "_history", garbage, "--force")
        self.kvtool("put", self.args.timeline_collection, f"problem-{self.nonce}-after", '{"text": "y"}')
        try:
            wait_for(lambda: (self.js(status_js) or [None])[0] == "live", 10, "live again")
        except WaitTimeout:
            fail("the timeline after the garbage was removed", "live", self.js(status_js))

    def check_denied_in_page(self):
        """Without its cookie, the page's next fetch is refused: the full-page message replaces it."""
        self.driver.delete_all_cookies()
        self.go("#consumers")
        try:
            text = wait_for(lambda: self.js("const d = document.querySelector('[data-testid=access-denied]');"
                                            "return d && d.innerText"), 5, "the access-denied message")
            check("Access denied: open the URL with its token" in text, "the access-denied message",
                  "'Access denied: open the URL with its token…'", repr(text))
        except WaitTimeout:
            fail("the page after losing its cookie", "the access-denied message", "none")
        self.shot("denied.png")

    def check_console(self):
        try:
            entries = self.driver.get_log("browser")
        except WebDriverException:
            return
        bad = [entry["message"] for entry in entries
               if "Content Security Policy" in entry["message"] or "Uncaught" in entry["message"]]
        check(not bad, "the browser console", "no CSP violations or uncaught errors", bad[:3])

    # ------------------------------------------------------------ main

    def run(self):
        os.makedirs(self.args.screenshots, exist_ok=True)
        self.learn_truth()
        self.start_browser()
        checks = [("no token", self.check_no_token), ("page load", self.check_page_load),
                  ("browse", self.check_browse), ("timeline", self.check_timeline), ("prefix", self.check_prefix),
                  ("files", self.check_files),
                  ("dashboard", self.check_dashboard), ("tables", self.check_tables),
                  ("hostile content", self.check_hostile_content), ("another port's page", self.check_other_port),
                  ("tabs and plain answers", self.check_tabs_and_plain_answers),
                  ("history problem", self.check_problem),
                  ("access denied in the page", self.check_denied_in_page)]
        for name, function in checks:
            started = time.monotonic()
            try:
                function()
            except Deadline:
                raise
            except Exception as error:  # noqa: BLE001 (one FAIL line per check, then the next check)
                fail(f"the {name} check", "to complete", f"{type(error).__name__}: {str(error).strip().splitlines()[0][:300]}")
            log(f"{name}: {(time.monotonic() - started) * 1000:.0f} ms")
        self.check_console()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="the URL kvtool serve printed, with its token")
    parser.add_argument("--kvtool", required=True)
    parser.add_argument("--root", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--expected-dashboard", required=True)
    parser.add_argument("--screenshots", required=True)
    parser.add_argument("--collection", default="dailyRecords")
    parser.add_argument("--timeline-collection", default="notes")
    args = parser.parse_args()

    def out_of_time(_signal, _frame):
        raise Deadline()
    signal.signal(signal.SIGALRM, out_of_time)
    signal.alarm(DEADLINE_SECONDS)
    started = time.monotonic()
    run = Run(args)
    try:
        run.run()
    except Deadline:
        fail("the browser test", f"to finish within {DEADLINE_SECONDS} s", "still running")
    except Exception as error:  # noqa: BLE001
        fail("the browser test", "to run", f"{type(error).__name__}: {str(error).strip()[:300]}")
    finally:
        signal.alarm(0)
        if run.driver is not None:
            signal.alarm(10)  # a wedged driver must not hold the run: kill chromedriver instead
            try:
                run.driver.quit()
            except BaseException:  # noqa: BLE001
                run.driver.service.process.kill()
            finally:
                signal.alarm(0)
    log(f"total {(time.monotonic() - started) * 1000:.0f} ms, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
