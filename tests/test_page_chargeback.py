"""The Chargeback page in Streamlit's AppTest: the ledger bills the batch team for the
morning tails under the shared pool, nobody under a partition, and follows the price."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from streamlit.testing.v1 import AppTest  # noqa: E402

from analytics.text import md  # noqa: E402
from analytics.whatif import PRESETS, capacity_plan  # noqa: E402
from apptest_helpers import drawn_table, isolate, metric as _metric, open_page, tables  # noqa: E402


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate(monkeypatch, tmp_path)


def _page(tmp_path: Path, **params: str) -> AppTest:
    return open_page("pages/chargeback.py", tmp_path, **params)


MINUTES = "Minutes over the SLO, pool, modelled"  # every service of the pool: a preset's one


def _num(text: str) -> float:
    return float(text.split("$")[-1].replace(",", ""))


def test_batch_team_pays_for_the_morning_tails(tmp_path: Path) -> None:
    at = _page(tmp_path, w_src="morning-ramp")
    assert _metric(at, "Billed the most") == "ml-research"
    top = next(m for m in at.metric if m.label == "Billed the most")
    # The bill over the seven days modelled, and a day of it: never a week's sum "for the day".
    assert re.fullmatch(r"\$[\d,]+ over 7 days \(\$[\d,]+ a day\)", top.delta), top.delta
    total, per_day = (float(x.replace(",", "")) for x in re.findall(r"\$([\d,]+)", top.delta))
    assert per_day == pytest.approx(total / 7, abs=1)
    charged = _num(_metric(at, "Charged to other teams"))
    assert charged > 0
    assert not at.dataframe and not at.selectbox  # a first render affords neither (bench/elements.py)
    ledger = tables(at)[0].value
    assert set(ledger["team"]) >= {"ml-research"}
    assert ledger["cost"].sum() >= charged - len(ledger)  # whole dollars a row
    # money, minutes and dates, never 87.423 or 4371.1479
    drawn = drawn_table(tables(at)[0])
    assert list(drawn.columns) == ["day (UTC)", "service", "team", "minutes over the SLO, modelled", "cost"]
    assert all(re.fullmatch(r"\$[\d,]+", c) for c in drawn["cost"]), list(drawn["cost"])
    assert all(re.fullmatch(r"[\d,]+\.\d", c) for c in drawn["minutes over the SLO, modelled"])
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\d", c) for c in drawn["day (UTC)"]), list(drawn["day (UTC)"])
    plan = tables(at)[1].value
    assert list(plan["Pool"]) == ["A", "B", "C"]
    # each pool's purpose is a list item under the table, not a cell a projector cuts
    assert "purpose" not in plan.columns
    purposes = next(m.value for m in at.markdown if m.value.startswith("- **A**: "))
    assert [line.split("**")[1] for line in purposes.splitlines()] == ["A", "B", "C"]
    expected = capacity_plan(PRESETS["morning-ramp"](7))["purpose"]  # the page's preset days
    assert all(md(p_) in purposes for p_ in expected)  # as drawn: escaped


def test_policy_and_price_change_the_bill(tmp_path: Path) -> None:
    at = _page(tmp_path, w_src="morning-ramp")
    charged = _num(_metric(at, "Charged to other teams"))
    at.number_input(key="cb_price").set_value(100.0).run()
    assert _num(_metric(at, "Charged to other teams")) == pytest.approx(2 * charged)
    at.radio(key="cb_policy").set_value("partitioned").run()
    assert _num(_metric(at, "Charged to other teams")) == 0
    assert _metric(at, "Billed the most") == "nobody else"


def test_what_if_edits_in_the_link_apply(tmp_path: Path) -> None:
    at = _page(tmp_path, w_src="morning-ramp", **{"w_pool.gpus": "96"})
    assert _num(_metric(at, MINUTES)) == 0
    assert not at.warning  # what happened, unless the link chose a forward-looking what-if


def test_a_forward_looking_what_if_in_the_link_is_billed_and_named(tmp_path: Path) -> None:
    plain = _num(_metric(_page(tmp_path, w_src="morning-ramp"), MINUTES))
    at = _page(tmp_path, w_src="morning-ramp", **{"w_x.traffic_growth": "1.3"})
    assert any("not what happened: traffic x1.3" in w.value for w in at.warning)
    assert _num(_metric(at, MINUTES)) > plain


def test_ledger_and_bills_add_up() -> None:
    from analytics.whatif import PRESETS, compare
    from analytics.whatif.ledger import bills, ledger

    scn = PRESETS["morning-ramp"](3)
    res = compare(scn, ("shared", "partitioned"))
    book = ledger(scn, res)
    for name, r in res.items():
        mine = book.filter(book["policy"] == name)
        for row in r.externality:
            got = mine.filter(mine["team"] == row["team"])["violation_minutes"].sum()
            assert got == pytest.approx(row["violation_minutes"])
        assert mine["violation_minutes"].sum() == pytest.approx(r.summary.violation_minutes)
    assert book.filter(book["policy"] == "shared")["period_start_ms"].n_unique() == 3  # days
    bill = bills(scn, res)
    shared = bill.filter(bill["policy"] == "shared")
    batch = shared.filter(shared["team"] == "ml-research").row(0, named=True)
    assert batch["externality_cost"] == pytest.approx(res["shared"].summary.externality_cost)
    assert batch["total"] == pytest.approx(batch["gpu_cost"] + batch["externality_cost"])


def test_what_if_and_chargeback_show_the_same_reservation(tmp_path: Path) -> None:
    """One reservation everyone uses: the What-if caption, Chargeback's pool A and the model's
    own reservation() agree for the same link, automatic or set."""
    import re

    from analytics.whatif import PRESETS, form, reservation

    def shown(at: AppTest, pattern: str) -> int:
        for c in at.caption:
            m = re.search(pattern, c.value)
            if m:
                return int(m.group(1))
        raise AssertionError([c.value for c in at.caption])

    for edits in ({"w_pool.reservation_gpus": "-1", "w_pool.headroom": "0.5"},
                  {"w_pool.reservation_gpus": "30"}):
        params = {"w_src": "morning-ramp", **edits}
        expected = reservation(form.apply(PRESETS["morning-ramp"](7), form.from_query(params)))[0]
        whatif = open_page("pages/whatif.py", tmp_path, **params)
        bill = _page(tmp_path, **params)
        assert shown(whatif, r"inference reservation (\d+) GPUs") == expected
        assert shown(bill, r"Pool A is the inference reservation.*?: (\d+) GPUs") == expected
        plan = next(df.value for df in tables(bill) if "Pool" in df.value.columns
                    and list(df.value["Pool"]) == ["A", "B", "C"])
        assert int(plan.loc[plan["Pool"] == "A", "GPUs"].iloc[0]) == expected


def test_price_policy_and_period_are_in_the_link(tmp_path: Path) -> None:
    """A copied link opens the same bill: price, policy and period travel in the URL."""
    at = _page(tmp_path, w_src="morning-ramp", cb_price="12.5", cb_period="week", cb_policy="tidal")
    assert at.number_input(key="cb_price").value == 12.5
    assert at.radio(key="cb_period").value == "week"
    assert at.radio(key="cb_policy").value == "tidal"
    at.number_input(key="cb_price").set_value(40.0).run()
    assert not at.exception
    assert at.query_params["cb_price"] == "40"
