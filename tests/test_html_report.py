"""`report --format html`: the page rendered in a real headless Chromium, checked against the
JSON report; `--out` written whole or not at all.

The browser tests (marked slow) render the demo's page, a real torch_npu capture's and a
generated 4-rank cluster's with the network disabled (every host name resolves to nothing, a
dead proxy): the screenshot must be non-blank (decoded here with zlib and struct), the
rendered DOM must hold every finding's title and time at stake as the JSON report has them,
and Chromium's network log must show no request of the page. A blank page and a page that
asks for a remote image show that these checks can fail.
"""

from __future__ import annotations

import html.parser
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

from npuscope.analysis.html_report import render_html
from npuscope.fixtures.generate import generate_cluster
from npuscope.text import printable

ROOT = Path(__file__).resolve().parents[1]
REAL = ROOT / "fixtures" / "samples" / "real" / "torch_npu_2024_cnn" / "level1" / "rank0_ascend_pt"
CHROMIUM = shutil.which("chromium")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None and not os.environ.get("CI"), reason="chromium is not installed (apt-get install chromium)"
)


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "npuscope", "report", *args], capture_output=True, text=True, cwd=cwd, timeout=120
    )


def _report(path: Path | None, out: Path, *extra: str) -> tuple[str, dict]:
    """The HTML page (through --out) and the JSON report of the same profile."""
    where = [str(path)] if path is not None else []
    res = _cli(*where, "--format", "html", "--out", str(out), *extra)
    assert res.returncode == 0, res.stderr
    assert res.stdout == ""
    js = _cli(*where, "--format", "json", *extra)
    assert js.returncode == 0, js.stderr
    return out.read_text(encoding="utf-8"), json.loads(js.stdout)


# --------------------------------------------------------------------------- the browser


def _chromium(page: Path, tmp: Path, *what: str) -> subprocess.CompletedProcess:
    """Chromium headless on `page` with the network disabled and a new profile folder."""
    assert CHROMIUM is not None, "chromium is not installed (apt-get install chromium)"
    profile = tmp / f"chromium-{len(list(tmp.glob('chromium-*')))}"
    profile.mkdir()
    cmd = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        "--host-resolver-rules=MAP * ~NOTFOUND",
        "--proxy-server=127.0.0.1:9",
        "--window-size=1280,2000",
        *what,
        page.resolve().as_uri(),
    ]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=90)
    assert res.returncode == 0, res.stderr[-2000:]
    return res


def screenshot(page: Path, tmp: Path) -> tuple[bytes, list[str]]:
    """The PNG of the page's first 1280x2000 pixels and the URLs the page asked for."""
    png, log = tmp / f"{page.stem}.png", tmp / f"{page.stem}.netlog.json"
    _chromium(page, tmp, f"--screenshot={png}", f"--log-net-log={log}")
    return png.read_bytes(), page_requests(log)


def dom_text(page: Path, tmp: Path) -> str:
    """The text of the DOM as Chromium built it, whitespace collapsed."""
    dom = _chromium(page, tmp, "--dump-dom").stdout
    assert "<body" in dom
    return text_of(dom)


class _Text(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skip = 0

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.skip += tag in ("style", "title", "head")

    def handle_endtag(self, tag: str) -> None:
        self.skip -= tag in ("style", "title", "head")

    def handle_data(self, data: str) -> None:
        if not self.skip:
            self.parts.append(data)


def text_of(markup: str) -> str:
    parser = _Text()
    parser.feed(markup)
    return " ".join(" ".join(parser.parts).split())


def page_requests(netlog: Path) -> list[str]:
    """The URLs other than file: and data: that the page (not the browser itself) asked for."""
    log = json.loads(netlog.read_text())
    start = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    urls = []
    for event in log["events"]:
        params = event.get("params") or {}
        if event["type"] == start and "file://" in str(params.get("network_isolation_key", "")):
            if not str(params["url"]).startswith(("file:", "data:")):
                urls.append(params["url"])
    return urls


def decode_png(data: bytes) -> np.ndarray:
    """The RGB pixels of an 8-bit, non-interlaced RGB or RGBA PNG (as Chromium writes)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, head = 8, [], None
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + n]
        pos += 12 + n
        if kind == b"IHDR":
            head = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
    assert head is not None, "no IHDR"
    w, h, depth, ctype, _, _, interlace = head
    assert depth == 8 and ctype in (2, 6) and interlace == 0, head
    bpp = 3 if ctype == 2 else 4
    raw = np.frombuffer(zlib.decompress(b"".join(idat)), dtype=np.uint8).reshape(h, w * bpp + 1)
    out = np.zeros((h, w * bpp), dtype=np.uint8)
    prev = np.zeros(w * bpp, dtype=np.uint8)
    for y in range(h):
        kind_, line = raw[y, 0], raw[y, 1:]
        if kind_ == 0:
            cur = line.copy()
        elif kind_ == 1:  # Sub: a running sum per channel
            cur = (np.cumsum(line.reshape(w, bpp).astype(np.uint32), axis=0) % 256).astype(np.uint8).reshape(-1)
        elif kind_ == 2:  # Up
            cur = line + prev
        else:  # Average, Paeth: byte by byte
            row, above = bytearray(line.tobytes()), prev.tobytes()
            for i in range(len(row)):
                a = row[i - bpp] if i >= bpp else 0
                b = above[i]
                if kind_ == 3:
                    row[i] = (row[i] + ((a + b) >> 1)) & 255
                else:
                    c = above[i - bpp] if i >= bpp else 0
                    pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                    row[i] = (row[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
            cur = np.frombuffer(bytes(row), dtype=np.uint8)
        out[y] = cur
        prev = cur
    return out.reshape(h, w, bpp)[:, :, :3]


def assert_non_blank(png: bytes) -> None:
    """A drawn page: many colours (the charts' and the severities') and ink on 3% of it."""
    pixels = decode_png(png).reshape(-1, 3)
    assert pixels.shape[0] == 1280 * 2000
    colours = len(np.unique(pixels[::7], axis=0))
    ink = float((pixels.min(axis=1) < 200).mean())
    assert colours >= 50, f"{colours} distinct colours: a blank page"
    assert ink >= 0.03, f"{ink:.1%} of the pixels drawn: a blank page"


class _Tags(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.tags.append((tag, attrs))


def assert_self_contained(page: str) -> None:
    """No script, no reference to anything outside the page, no event handler."""
    parser = _Tags()
    parser.feed(page)
    tags = {tag for tag, _ in parser.tags}
    assert not tags & {"script", "link", "img", "iframe", "object", "embed", "image", "use"}, tags
    attrs = {name for _, pairs in parser.tags for name, _ in pairs}
    assert not attrs & {"src", "href", "xlink:href", "srcset", "action"}, "a resource reference"
    assert not [a for a in attrs if a.startswith("on")], "an inline event handler"
    assert "http://" not in page and "https://" not in page
    assert "@import" not in page and "url(" not in page


def at_stake(f: dict) -> str:
    """The time at stake as the text report writes it (analysis/report.py's render)."""
    return f"{f['time_us']:,.0f} us" if f["time_us"] else "-"


def assert_findings_shown(text: str, cards: list[dict]) -> None:
    n = 0
    for card in cards:
        for f in card["findings"]:
            title = " ".join(printable(f["title"]).split())
            assert title in text, title
            assert f"at stake {at_stake(f)}" in text, (f["rule"], at_stake(f))
            n += 1
    assert n, "no findings to look for"


# --------------------------------------------------------------------------- the pages


@pytest.mark.slow
@needs_chromium
@pytest.mark.parametrize("which", ["demo", "real"])
def test_page_renders_findings_in_chromium(which, tmp_path):
    path = None if which == "demo" else REAL
    out = tmp_path / f"{which}.html"
    page, doc = _report(path, out)
    assert_self_contained(page)
    png, requests = screenshot(out, tmp_path)
    assert requests == []
    assert_non_blank(png)
    text = dom_text(out, tmp_path)
    assert text.startswith(f"npuscope report: {doc['source']['capture']}")
    assert_findings_shown(text, doc["cards"])
    for card in doc["cards"]:
        s = card["summary"]
        assert f"card {card['card']}" in text
        assert f"tasks {s['tasks']:,}" in text and f"wait {s['wait_us']:,.1f} us" in text
        for r in card["top_wait"]:
            assert f"{r['wait_us']:,.3f}" in text  # the longest waits' table
        assert card["op_statistic"][0]["op_type"] in text
    # The charts: a timeline per card, the op types, the steps, the longest tasks and waits.
    labels = re.findall(r'<svg class="chart"[^>]*aria-label="([^"]*)"', page)
    assert labels.count("total time per op type") == len(doc["cards"])
    assert sum(label.startswith("timeline of card") for label in labels) == len(doc["cards"])
    assert "longest tasks" in labels and "longest waits" in labels
    if any(card.get("steps") for card in doc["cards"]):
        assert "per-step time" in labels


@pytest.mark.slow
@needs_chromium
def test_cluster_pages_render_ranks_in_chromium(tmp_path):
    cluster = generate_cluster(tmp_path / "gen", ranks=4, rows=400).root
    out = tmp_path / "cluster.html"
    page, doc = _report(cluster, out)
    assert_self_contained(page)
    png, requests = screenshot(out, tmp_path)
    assert requests == []
    assert_non_blank(png)
    text = dom_text(out, tmp_path)
    c = doc["cluster"]
    assert text.startswith(f"npuscope cluster: {cluster.name}")
    assert f"slow ranks: {', '.join(c['slow_ranks'])};" in text and f"spread {c['spread_pct']:.1f}%" in text
    for r in c["ranks"]:
        assert f"{r['compute_us']:,.3f}" in text  # the ranks' table
    assert "per-rank mean step" not in text  # (a chart label, not text)
    assert 'aria-label="per-rank time"' in page
    assert_findings_shown(text, doc["cards"])
    assert f"rank {doc['rank']} · card" in text

    # --card all: every rank's report on one page, as the streamed JSON has them.
    out_all = tmp_path / "all.html"
    page, doc = _report(cluster, out_all, "--card", "all")
    assert_self_contained(page)
    text = dom_text(out_all, tmp_path)
    assert {card["rank"] for card in doc["cards"]} == {r["rank"] for r in doc["cluster"]["ranks"]}
    assert_findings_shown(text, doc["cards"])
    for card in doc["cards"]:
        assert f"rank {card['rank']} · card {card['card']}" in text


@pytest.mark.slow
@needs_chromium
def test_the_checks_fail_on_a_blank_page_and_a_remote_image(tmp_path):
    blank = tmp_path / "blank.html"
    blank.write_text("<!DOCTYPE html><html><body></body></html>")
    png, requests = screenshot(blank, tmp_path)
    assert requests == []
    with pytest.raises(AssertionError, match="a blank page"):
        assert_non_blank(png)
    remote = tmp_path / "remote.html"
    remote.write_text('<!DOCTYPE html><html><body><img src="http://npuscope.invalid/x.png"></body></html>')
    _, requests = screenshot(remote, tmp_path)
    assert requests == ["http://npuscope.invalid/x.png"]
    with pytest.raises(AssertionError):
        assert_self_contained(remote.read_text())
    with pytest.raises(AssertionError, match="resource reference"):
        assert_self_contained('<svg><a href="#x">x</a></svg>')
    with pytest.raises(AssertionError, match="event handler"):
        assert_self_contained('<div onclick="x()">x</div>')


# --------------------------------------------------------------------------- no browser


def test_profile_strings_are_escaped(tmp_path):
    res = _cli("--format", "json", "--card", "0", "--top", "2")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    evil = '<script>alert(1)</script><img src=x onerror="alert(2)">'
    card = doc["cards"][0]
    card["top_duration"][0]["op_name"] = evil
    card["op_statistic"][0]["op_type"] = evil
    card["findings"][0]["title"] = evil + "\x1b[31m"
    doc["source"]["path"] = "/tmp/" + evil
    page = render_html(doc)
    assert "<script" not in page and "<img" not in page and "\x1b" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert_self_contained(page)
    assert evil in text_of(page)


def test_out_writes_every_format_whole(tmp_path):
    for fmt in ("text", "json"):
        out = tmp_path / f"report.{fmt}"
        res = _cli("--format", fmt, "--card", "1", "--out", str(out))
        assert res.returncode == 0 and res.stdout == "", res.stderr
        assert out.read_text() == _cli("--format", fmt, "--card", "1").stdout
    # An existing file is replaced; a failed report leaves it as it was and no temporary file.
    out = tmp_path / "report.html"
    out.write_text("old")
    assert _cli("--format", "html", "--out", str(out)).returncode == 0
    assert out.read_text().startswith("<!DOCTYPE html>")
    before = out.read_text()
    res = _cli("--format", "html", "--card", "7", "--out", str(out))
    assert res.returncode == 2 and res.stderr.startswith("npuscope: no card '7'") and len(res.stderr.splitlines()) == 1
    assert out.read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "report.html",
        "report.json",
        "report.text",
    ]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--out", "{tmp}"], "is a folder"),
        (["--out", "{tmp}/no/such/report.html"], "no folder"),
        (["--format", "html", "--op", "ReduceSum"], "--op prints the op report"),
    ],
)
def test_bad_out_and_options_are_one_line(tmp_path, args, message):
    res = _cli(*[a.format(tmp=tmp_path) for a in args])
    assert res.returncode == 2
    assert message in res.stderr and len(res.stderr.splitlines()) == 1 and "Traceback" not in res.stderr
    assert list(tmp_path.iterdir()) == []
