"""Every view setting survives a link, in Chromium: a URL holding a non-default value of every
setting (the sidebar's and each page's own) opens each page with those values in its widgets,
and the URL still holds every one of them once the page has drawn. Then a setting changed on
the page reaches the URL, and the server's log stays free of warnings throughout.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from analytics.times import local_naive, parse_time_ms

from test_browser import (CHROMIUM, CHROMIUM_ARGS, _need_browser, free_port, open_page, start_app, stop_app,
                          wait_healthy, wait_settled)
from test_app_pages import build_store  # an hour from 08:00 UTC: the link's range lies inside it

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]

SIDEBAR = {"step": "300", "slo": "150", "tz": "Asia/Tokyo",
           "start": "2025-11-28T08:05:00Z", "end": "2025-11-28T08:55:00Z"}
EVENTS = {"ev_min": "3", "ev_gap": "5"}
RHYTHM = {"rh_res": "1800", "rh_tidal": "0.3", "rh_band": "0.9"}
WHATIF = {"w_src": "morning-ramp", "w_pol": "shared,partitioned", "w_pool.gpus": "96"}
CHARGEBACK = {"w_src": "morning-ramp", "cb_price": "123", "cb_policy": "partitioned", "cb_period": "week"}


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path, Path]]:
    _need_browser()
    tmp = tmp_path_factory.mktemp("browser-links")
    db = build_store(tmp / "hour.duckdb")
    port = free_port()
    log = tmp / "server.log"
    proc = start_app({"TIDELENS_UPLOADS_DB": str(tmp / "uploads.duckdb"),
                      "TIDELENS_CONFIG": str(tmp / "tidelens.toml")}, port, log=log)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc)
        yield url, db, log
    finally:
        stop_app(proc)


def _event(db: Path, capsys: pytest.CaptureFixture[str]) -> dict:
    """The id `tidelens events` gives the event under the link's settings (the app's id too)."""
    from analytics.cli import main

    assert main(["events", "--db", str(db), "--json", "--slo-ms", SIDEBAR["slo"], "--step", "5m",
                 "--from", SIDEBAR["start"], "--to", SIDEBAR["end"],
                 "--min-duration-min", EVENTS["ev_min"], "--merge-gap-min", EVENTS["ev_gap"]]) == 0
    events = json.loads(capsys.readouterr().out)
    assert events, "the hour's store has its tail event under these settings"
    return events[-1]


def _params(page) -> dict[str, str]:
    return dict(urllib.parse.parse_qsl(urllib.parse.urlparse(page.url).query))


def _css(key: str) -> str:
    """The CSS class Streamlit gives a widget key."""
    return "st-key-" + re.sub(r"[^a-zA-Z0-9_-]", "-", key)


def _value(page, key: str) -> str:
    return page.locator(f".{_css(key)} input").first.input_value()


def _chosen(page, key: str) -> list[str]:
    """The text of the options a radio, segmented control, pills or select slider under ``key``
    shows chosen."""
    key = _css(key)
    return [t.strip() for t in page.locator(
        f".{key} label:has(input:checked), .{key} button[aria-checked=true], "
        f".{key} button[aria-pressed=true], .{key} [data-testid=stSliderThumbValue]").all_inner_texts()]


def test_every_setting_round_trips_through_a_link(app, capsys) -> None:
    from playwright.sync_api import sync_playwright

    base, db, log = app
    source = {"source": "duckdb", "db": str(db)}
    event = _event(db, capsys)
    links = {"overview": SIDEBAR, "rhythm": {**SIDEBAR, **RHYTHM},
             "events": {**SIDEBAR, **EVENTS, "event": event["id"]}, "whatif": {**SIDEBAR, **WHATIF},
             "chargeback": {**SIDEBAR, **CHARGEBACK}}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            for path, settings in links.items():
                # a fresh session per page: the link alone decides the view
                page = browser.new_page(viewport={"width": 1600, "height": 1400}, timezone_id="Europe/Paris")
                want = {**source, **settings}
                open_page(page, f"{base}/{path}?{urllib.parse.urlencode(want)}")
                wait_settled(page)
                assert page.locator('[data-testid="stException"]').count() == 0, path
                got = _params(page)
                lost = {k: (v, got.get(k)) for k, v in want.items() if got.get(k) != v}
                assert not lost, f"{path}: the link's settings changed on the way: {lost}"
                sidebar = page.locator('[data-testid="stSidebar"]').inner_text()
                assert "5 min" in sidebar and "Asia/Tokyo" in sidebar, (path, sidebar)
                if path == "events":
                    # the detection rule's panel says the link's rule, and its inputs hold it once opened
                    rule = page.locator(".st-key-ev_rule button").first
                    assert "runs of 3 min or more, gaps under 5 min" in rule.inner_text(), rule.inner_text()
                    rule.click()
                    page.wait_for_selector(".st-key-ev_gap input", timeout=60_000)
                    wait_settled(page)
                    assert float(_value(page, "ev_min_dur")) == 3 and float(_value(page, "ev_gap")) == 5
                    # the link's event is shown, its start in the link's zone
                    start = local_naive(parse_time_ms(event["start"]), SIDEBAR["tz"])
                    chosen = _chosen(page, "ev_chosen")
                    assert len(chosen) == 1 and chosen[0].startswith(f"{start:%Y-%m-%d %H:%M} · "), chosen
                if path == "rhythm":
                    # a slider shows its value above its thumb
                    shown = [t for t in page.locator(".st-key-rhythm_tidal").inner_text().splitlines() if t]
                    assert shown[:2] == ["Tidal share of peak", "0.30"], shown
                    assert _chosen(page, "rhythm_resolution") == ["30 min"]
                if path == "whatif":
                    assert _chosen(page, "w_pol") == ["shared", "partitioned"]
                    assert float(_value(page, "w_f.pool.gpus")) == 96
                if path == "chargeback":
                    assert float(_value(page, "cb_price")) == 123
                    assert _chosen(page, "cb_policy") == ["partitioned"]
                    assert page.locator(".st-key-cb_period input[type=radio]:checked").count() == 1
                    assert page.locator(".st-key-cb_period label", has_text="week").locator(
                        "input").is_checked()
                page.close()
            # A setting changed on a page reaches the URL (and leaves the others alone).
            page = browser.new_page(viewport={"width": 1600, "height": 1400})
            open_page(page, f"{base}/events?{urllib.parse.urlencode({**source, **SIDEBAR, **EVENTS})}")
            page.locator(".st-key-ev_rule button").first.click()
            page.wait_for_selector(".st-key-ev_gap input", timeout=60_000)
            wait_settled(page)
            box = page.locator(".st-key-ev_gap input").first
            box.fill("7")
            box.press("Enter")
            page.wait_for_function("() => new URL(location.href).searchParams.get('ev_gap') === '7'",
                                   timeout=60_000)
            wait_settled(page)
            assert _params(page)["ev_min"] == "3" and _params(page)["step"] == "300"
            page.close()
        finally:
            browser.close()
    said = [line for line in log.read_text().splitlines()
            if "WARNING" in line or "Traceback" in line or "Error" in line]
    assert not said, said[:5]
