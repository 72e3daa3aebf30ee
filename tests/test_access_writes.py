"""Every write through one check (issue 50): each write widget of every page, walked in AppTest as
anonymous, viewer, editor and admin (Streamlit's OIDC sign-in, seeded as AppTest allows), with
the store's folder compared before and after each; and the pages scanned for any other way to
write.

A write is found by what it changes, not by which widget it is: every file in the folder (the
store, its write-ahead log, ``tidelens.toml``, a mapping beside the store) is hashed before and
after each widget. A change with no new row in the store's audit record, a row whose role may not
do its action, or any change by a role that may not write fails. The library's own check is
tests/test_access.py; the deployed, browser side tests/test_access_deployed.py and
tests/test_access_operator.py.
"""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from analytics import nvml
from analytics.access import ACTIONS, LOCAL_OPERATOR, Identity, allows
from analytics.audit import audit_dicts
from analytics.change.record import PolicyChange, list_changes
from analytics.errors import AccessDenied
from analytics.store import Store
from analytics.writes import record_policy_change
from apptest_helpers import APP, isolate
from test_app_pages import T0_MS, build_store, scrape_text
from test_ingest_mapping import WAREHOUSE
from test_nvml import fake_pynvml

ROOT = Path(__file__).resolve().parent.parent
ACCESS = ('[access]\nsign_in = "oidc"\nadmins = ["root@example.com"]\neditors = ["ed@example.com"]\n\n'
          '[live]\nservers = ["http://prom.internal:9090"]\n')
USERS = {"anonymous": {"is_logged_in": False},
         "viewer": {"is_logged_in": True, "email": "vic@example.com"},
         "editor": {"is_logged_in": True, "email": "ed@example.com"},
         "admin": {"is_logged_in": True, "email": "root@example.com"}}
# The audit record's word for each kind of write, and the action (analytics.access.ACTIONS) it needs.
AUDITED_AS = {"load": "load", "collect": "load", "pull": "pull", "mapping": "save_mapping", "map": "change_map",
              "change": "record_change"}
PULL_TAB = "Prometheus / Thanos / Mimir / VictoriaMetrics"
HOUR_MS = 3_600_000


@dataclass(frozen=True)
class Widget:
    """A write widget: the analytics.writes function it reaches, the action it needs, where it is
    drawn, and how a visitor uses it (``act`` returns False when it is not drawn for them)."""

    writes: str
    action: str
    page: str
    act: Callable[[AppTest, int], bool]
    tab: str | None = None


def _drawn(at: AppTest, kind: str, key: str):
    found = [w for w in at.get(kind) if getattr(w, "key", None) == key]
    return found[0] if found else None


def _upload(at: AppTest, i: int) -> bool:
    widget = _drawn(at, "file_uploader", "upload_files")
    if widget is None:
        return False
    widget.set_value((f"walk-{i}.prom", scrape_text(T0_MS + (i + 2) * HOUR_MS, minutes=3), "text/plain")).run()
    return True


def _mapped_table(at: AppTest, i: int) -> bool:
    widget = _drawn(at, "file_uploader", "map_file")
    if widget is None:
        return False
    shifted = WAREHOUSE.replace(b"17675712", str(17675712 + 36 * (i + 1)).encode())  # another hour each time
    widget.set_value([(f"duty-{i}.csv", shifted, "text/csv")]).run()
    at.button(key="map_load_go").click().run()
    return True


def _pull(at: AppTest, i: int) -> bool:
    url = _drawn(at, "text_input", "pull_url")
    if url is None:
        return False
    url.set_value("http://unlisted.example:9090").run()  # refused, and an editor's refusal is recorded
    at.button(key="pull_go").click().run()
    return True


def _collect(at: AppTest, i: int) -> bool:
    if _drawn(at, "button", "nvml_go") is None:
        return False
    at.text_input(key="nvml_interval").set_value("100ms")
    at.text_input(key="nvml_duration").set_value("100ms").run()
    at.button(key="nvml_go").click().run()
    return True


def _edit_map(at: AppTest, i: int) -> bool:
    at.session_state["workload_edit"] = True
    at.run()
    editors = [e for e in at.data_editor if e.key == "workload_editor"]
    if not editors:
        return False
    table = editors[0].value
    row = int(table.index[table["workload"] == "nightly-finetune"][0])
    at.session_state["workload_editor"] = {"edited_rows": {row: {"team": f"team-{i}"}}, "added_rows": [],
                                           "deleted_rows": []}
    at.run()
    return True


def _record_change(at: AppTest, i: int) -> bool:
    at.session_state["w_change"] = True  # the folded section, opened
    at.run()
    submit = [b for b in at.button if b.key and b.key.startswith("FormSubmitter:w_change_form")]
    if not submit:
        return False
    at.text_input(key="w_change_at").set_value(f"2025-11-2{i}T00:00Z")
    submit[0].click().run()
    return True


# The What-if first: its section's basis is built per store version, and the Data page's writes
# would make every role rebuild it.
WIDGETS = (
    Widget("record_policy_change", "record_change", "pages/whatif.py", _record_change),
    Widget("load_upload", "load", "pages/data.py", _upload, "Files"),
    Widget("save_mapping", "save_mapping", "pages/data.py", _mapped_table, "Your own table"),
    Widget("pull", "pull", "pages/data.py", _pull, PULL_TAB),
    Widget("collect", "load", "pages/data.py", _collect, "Local GPUs (NVML)"),
    Widget("save_workload_map", "change_map", "pages/data.py", _edit_map),
)


def _footprint(folder: Path) -> dict[str, str]:
    """Every file under ``folder``, by its content's hash."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _audit(db: Path) -> list[dict]:
    with Store(db, read_only=True) as st:
        return audit_dicts(st)


@pytest.fixture
def walk_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    isolate(monkeypatch, tmp_path)
    monkeypatch.setenv("TIDELENS_DATA_DIR", str(tmp_path))
    monkeypatch.setattr(nvml, "_nvml_module", lambda: fake_pynvml(gpus=1))  # GPUs cannot exist here
    (tmp_path / "tidelens.toml").write_text(ACCESS)
    build_store(tmp_path / "walk.duckdb")
    return tmp_path


def test_every_write_widget_goes_through_the_check_for_every_role(walk_folder: Path) -> None:
    db = walk_folder / "walk.duckdb"
    done: dict[tuple[str, str], bool] = {}
    rows_seen = len(_audit(db))  # a new row changes the store's file: read the record only then
    for i, (role, user) in enumerate(USERS.items()):
        who = Identity(user.get("email", "anonymous"), None if role == "anonymous" else role, "oidc")
        # One session per role, from page to page as a visitor goes; the What-if replays one
        # policy (the form does not depend on them).
        at = AppTest.from_file(str(APP), default_timeout=120)
        at.user = user
        at.query_params.update({"source": "duckdb", "db": str(db), "w_src": "morning-ramp", "w_pol": "shared"})
        at.run()
        page = None
        for widget in WIDGETS:
            if widget.page != page:
                page = widget.page
                at.switch_page(page).run()
            if widget.tab is not None and at.tabs:  # a visitor who may add nothing gets no tabs
                at.session_state["data_add"] = widget.tab
                at.run()
            before = _footprint(walk_folder)
            drawn = widget.act(at, i)
            assert not at.exception, (role, widget.writes, [e.value for e in at.exception])
            changed = sorted(k for k, v in _footprint(walk_folder).items() if before.get(k) != v)
            rows = _audit(db) if changed else []
            new_rows, rows_seen = rows[: len(rows) - rows_seen], len(rows) if changed else rows_seen
            done[role, widget.writes] = bool(changed)
            label = f"{role}, {widget.writes}"
            assert not changed or new_rows, f"{label}: {changed} changed with no row in the audit record"
            for row in new_rows:
                assert row["who"] == who.who and allows(Identity(row["who"], row["role"], "oidc"),
                                                        AUDITED_AS[row["action"]]), (label, row)
            if allows(who, widget.action):
                assert drawn and changed, f"{label}: the {role} may do this, and it did not happen"
            else:
                assert not changed, f"{label}: the {role} may not {widget.action}, and {changed} changed"
    # The walk did write: once each for an editor (the map is an admin's) and once each for an admin.
    assert [w for (r, w), wrote in done.items() if wrote] == [
        *(w.writes for w in WIDGETS if w.action != "change_map"), *(w.writes for w in WIDGETS)]
    with Store(db, read_only=True) as st:
        assert [c.source for c in list_changes(st)] == ["the What-if page"] * 2


# -- the scan: no page writes but through analytics.writes ----------------------------------------
# The library's writers a page must reach only through analytics.writes (which calls them after the check).
LIBRARY_WRITERS = frozenset({"record_change", "ingest_upload", "ingest_bytes", "ingest_path", "save_map",
                             "record", "load_into", "write_store_slos", "recorded"})


def _page_modules() -> list[Path]:
    return [ROOT / "app.py", *sorted((ROOT / "pages").glob("*.py"))]


def _writes_called(tree: ast.AST) -> tuple[set[str], list[ast.Call]]:
    """The analytics.writes functions a module imports (under whatever name), and its calls of them."""
    names = {a.asname or a.name: a.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
             and node.module == "analytics.writes" for a in node.names}
    calls = [c for c in ast.walk(tree) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
             and c.func.id in names]
    return {names[c.func.id] for c in calls}, calls


def test_pages_open_a_store_for_writing_only_to_hand_it_to_analytics_writes() -> None:
    reached: set[str] = set()
    for path in _page_modules():
        tree = ast.parse(path.read_text(), str(path))
        where = path.relative_to(ROOT)
        functions = {n: f.name for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) for n in ast.walk(f)}
        called, checked_calls = _writes_called(tree)
        reached |= called
        inside_checked = {id(n) for c in checked_calls for n in ast.walk(c)}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("analytics"):
                bad = {a.name for a in node.names} & LIBRARY_WRITERS
                assert not bad or node.module == "analytics.writes", f"{where}:{node.lineno}: imports {bad}"
            if not isinstance(node, ast.Call):
                continue
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            writable = {k.arg: k.value for k in node.keywords}.get("read_only")
            in_function = functions.get(node)
            if name == "connect" or (name == "Store" and in_function != "open_store"):
                raise AssertionError(f"{where}:{node.lineno}: a page opens a database itself")
            if name == "open_store" and writable is not None and not (
                    isinstance(writable, ast.Constant) and writable.value is True):
                assert (str(where), in_function) == ("pages/_store.py", "writer"), (
                    f"{where}:{node.lineno}: a store opened for writing outside pages/_store.writer")
            if name == "writer":
                assert id(node) in inside_checked, (
                    f"{where}:{node.lineno}: a writable store handed to something other than analytics.writes")
    # Every write a page can make is one the walk above uses.
    assert reached == {w.writes for w in WIDGETS}, reached ^ {w.writes for w in WIDGETS}


def test_recording_a_change_checks_the_role_and_leaves_a_row(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    change = PolicyChange(at_ms=1_791_417_600_000, policy="tidal", tidal_window=(22.0, 8.0))
    opened: list[Path] = []

    def writer():
        opened.append(db)
        return Store(db)

    for who in (Identity("vic", "viewer", "header"), Identity("visitor", "viewer", "none"),
                Identity("anonymous", None, "none")):
        with pytest.raises(AccessDenied, match="recording a change of the pool's policy needs the editor role"):
            record_policy_change(who, writer, change)
    assert not opened  # refused before anything was opened
    record_policy_change(LOCAL_OPERATOR, writer, change)
    with Store(db, read_only=True) as st:
        assert list_changes(st) == [change]
        [row] = audit_dicts(st)
    assert (row["who"], row["role"], row["action"], row["outcome"]) == ("local operator", "admin", "change", "recorded")
    assert row["what"] == change.describe() and ACTIONS["record_change"] == "editor"
