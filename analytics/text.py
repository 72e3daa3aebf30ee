"""Text from the data, made safe wherever it is drawn: Markdown, HTML, Plotly, CSV.

Label values come from exports nobody vetted: a service named ``chat![s](http://x/px.png)`` must
read as those characters on every page, never fetch an image; a team ``=HYPERLINK(...)`` must
stay text in a spreadsheet. Every page, chart and export passes label-derived text through one
of these (the only place that knows the rules):

- :func:`md` for Streamlit Markdown (captions, headings, metrics, messages), :func:`code` for
  a path or command shown as a code span; :func:`md_line` for a Markdown file (a plan's README),
  where a label must stay on its line and hold no raw HTML even inside a code span;
- :func:`plot_text` for Plotly (trace names, hover text, titles built from labels): HTML-escaped,
  since Plotly renders a subset of HTML (``<a href>``, ``<img>`` are not for data);
- :func:`csv_cell` / :func:`safe_csv` for CSV exports (OWASP's CSV-injection rule);
- :func:`visible` shows control characters (an RTL override, NUL, ESC) as escapes, the CLI's
  every line included (:func:`visible_frame` for a table, :func:`json_visible` for JSON).

>>> md("chat![s](x.png)"), md("chat![s](http://x/px.png)")
('chat\\\\!\\\\[s\\\\]\\\\(x.png\\\\)', '`chat![s](http://x/px.png)`')
>>> plot_text("<a href='x'>t</a>")
'&lt;a href=&#x27;x&#x27;&gt;t&lt;/a&gt;'
>>> csv_cell('=HYPERLINK("http://evil","pwn")'), csv_cell(-3), csv_cell("-3")
('\\'=HYPERLINK("http://evil","pwn")', -3, "'-3")
"""

from __future__ import annotations

import html
import re
import unicodedata
from typing import Any

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+!|~$:])")
# What GFM's autolink-literal extension turns into a link: scheme://, www., an e-mail's @.
_AUTOLINK = re.compile(r"(?i)://|www\.|@|mailto:|xmpp:")
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NOT_PRINTABLE_ASCII = re.compile(r"[^\x20-\x7e]")


def visible(x: Any, keep: str = "\n\t") -> str:
    """``x`` as text with control and bidirectional-override characters shown as ``\\uXXXX``
    (ESC, C0 and C1 controls, U+202E and the other format characters), except those in ``keep``.

    >>> visible("a\\u202eb\\x00c")
    'a\\\\u202eb\\\\u0000c'

    A terminal line (a file name in ``tidelens ingest``) keeps no newline either:

    >>> visible("x\\x1b[2Jy\\nz", keep="")
    'x\\\\u001b[2Jy\\\\u000az'
    """
    def shown(m: re.Match[str]) -> str:
        c = m.group()
        return c if c in keep or not unicodedata.category(c).startswith("C") else f"\\u{ord(c):04x}"

    # only characters outside printable ASCII are looked at: a long CLI listing stays cheap
    return _NOT_PRINTABLE_ASCII.sub(shown, str(x))


def json_visible(text: str) -> str:
    """JSON text with every control and format character inside its strings written as a JSON
    escape: the same data to a JSON reader, nothing a terminal acts on.

    >>> json_visible('{"name": "a\u202eb\x7f"}')
    '{"name": "a\\\\u202eb\\\\u007f"}'
    """
    import json

    def escaped(m: re.Match[str]) -> str:
        c = m.group()
        return c if c == "\n" or not unicodedata.category(c).startswith("C") else json.dumps(c)[1:-1]

    # orjson writes C0 controls as escapes already; DEL, C1 and the format characters it does not
    return _NOT_PRINTABLE_ASCII.sub(escaped, text)


def md(x: Any) -> str:
    """Text safe in Markdown (Streamlit's, a report's): HTML as entities, Markdown characters
    backslash-escaped, controls shown.

    >>> md("<script>alert(1)</script> a|b")
    '&lt;script&gt;alert\\\\(1\\\\)&lt;/script&gt; a\\\\|b'


    ``:`` is escaped too, so ``:red[...]`` and ``:material/...:`` directives in data stay text.
    Text holding a URL, a ``www.`` name or an ``@`` becomes a code span (see :func:`code`):

    >>> md("chat![s](http://x/px.png)")
    '`chat![s](http://x/px.png)`'
    """
    if _AUTOLINK.search(str(x)):
        # Streamlit's Markdown links bare URLs, www. names and e-mail addresses even through
        # backslash escapes and entities (tests/test_browser_hostile.py found one); a code span
        # is the one place it never links, and it shows the label's exact characters.
        return code(x)
    s = visible(x).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SPECIAL.sub(r"\\\1", s).replace("\n", " ")


def md_line(x: Any) -> str:
    r"""Text safe anywhere in a line of a Markdown file (a plan's README, read by any renderer):
    as :func:`md`, HTML as entities and every Markdown character backslash-escaped, but never a
    code span (so no raw ``<`` at all) and never more than one line: a newline is shown as
    ``\n``, a tab as ``\t``, other controls and the Unicode line and paragraph separators as
    escapes, and a leading ``-``, ``=`` or ``1.`` (a list item, a rule, a heading's underline)
    is escaped too. A URL stays text, which a renderer may link (showing the same characters).

    >>> md_line("x\n# heading\nkind: Secret")
    'x\\\\n\\# heading\\\\nkind\\: Secret'
    >>> md_line("`<img src=x onerror=alert(1)>`"), md_line("--- a|b"), md_line("1. x"), md_line(0.5)
    ('\\`&lt;img src=x onerror=alert\\(1\\)&gt;\\`', '\\--- a\\|b', '1\\. x', '0.5')
    """
    s = visible(x).replace("\n", "\\n").replace("\t", "\\t")
    s = s.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")  # line breaks to some viewers
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    s = _MD_SPECIAL.sub(r"\\\1", s)
    s = re.sub(r"^(\d{1,9})\.(?= |$)", r"\1\\.", s)  # "1. x" starts a list; "0.5" does not
    return "\\" + s if s.startswith(("-", "=")) else s


def code(x: Any) -> str:
    """``x`` as a Markdown code span (a path, a command) that no backtick inside can close early:
    the fence is one backtick longer than the longest run inside (CommonMark), controls shown.

    >>> code("/data/t.duckdb"), code("a`![i](http://x)`b")
    ('`/data/t.duckdb`', '``a`![i](http://x)`b``')
    """
    s = visible(x).replace("\n", " ")
    longest = max((len(m) for m in re.findall(r"`+", s)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def plot_text(x: Any) -> str:
    """Text safe in a Plotly label: HTML-escaped (Plotly renders ``<a>``, ``<br>`` and such), controls shown."""
    return html.escape(visible(x), quote=True)


def csv_cell(x: Any) -> Any:
    """A CSV cell that no spreadsheet runs: text starting with ``= + - @`` tab or CR gets a ``'``.

    Numbers stay numbers (a negative number is data, not a formula).
    """
    if isinstance(x, str) and x.startswith(_FORMULA_START):
        return "'" + x
    return x


def safe_csv(frame: Any) -> Any:
    """A polars frame with every text column neutralised by :func:`csv_cell` (others untouched)."""
    import polars as pl

    text_cols = [c for c, t in frame.schema.items() if t == pl.Utf8]
    if not text_cols:
        return frame
    starts = "|".join(re.escape(p) for p in _FORMULA_START)
    return frame.with_columns(
        pl.when(pl.col(c).str.contains(f"^(?:{starts})")).then(pl.lit("'") + pl.col(c)).otherwise(pl.col(c)).alias(c)
        for c in text_cols)


def safe_table(frame: Any) -> Any:
    r"""A frame fit for an on-page table, whose own download button writes CSV: control and
    bidirectional-override characters shown as escapes (:func:`visible`), then :func:`safe_csv`.

    >>> import polars as pl
    >>> safe_table(pl.DataFrame({"pod": ["a\u202eb", "=1+1"], "n": [1, 2]})).rows()
    [('a\\u202eb', 1), ("'=1+1", 2)]
    """
    return safe_csv(visible_frame(frame))


def visible_frame(frame: Any, keep: str = "\n\t") -> Any:
    r"""A polars frame whose text columns went through :func:`visible` (a no-op, cheap, when no
    cell holds a control character).

    >>> import polars as pl
    >>> visible_frame(pl.DataFrame({"name": ["ok", "\x1b[31mred"]})).rows()
    [('ok',), ('\\u001b[31mred',)]
    """
    import polars as pl

    text_cols = [c for c, t in frame.schema.items() if t == pl.Utf8]
    if text_cols:
        controls = r"\p{C}"  # the characters visible() escapes (less those it keeps)
        flagged = frame.select(pl.any_horizontal(pl.col(c).str.contains(controls).fill_null(False)
                                                 for c in text_cols)).to_series()
        if flagged.any():
            frame = frame.with_columns(pl.col(c).map_elements(lambda v: visible(v, keep), return_dtype=pl.Utf8)
                                       for c in text_cols)
    return frame


def escape_figure(fig: Any) -> Any:
    """A Plotly figure whose data-borne text (trace names, text, hover text, string custom data,
    legend groups) is :func:`plot_text`-escaped; templates and titles the code wrote are kept.
    Escaping twice is a no-op (the figure's ``layout.meta`` records it)."""
    meta = fig.layout.meta if isinstance(fig.layout.meta, dict) else {}
    if meta.get("tidelens_escaped"):
        return fig
    fig.update_layout(meta={**meta, "tidelens_escaped": True})
    for trace in fig.data:
        for attr in ("name", "legendgroup"):
            v = getattr(trace, attr, None)
            if isinstance(v, str):
                setattr(trace, attr, plot_text(v))
        for attr in ("text", "hovertext"):
            v = getattr(trace, attr, None)
            if isinstance(v, str):
                setattr(trace, attr, plot_text(v))
            elif v is not None and len(v) and isinstance(v[0], str):
                setattr(trace, attr, [plot_text(t) if isinstance(t, str) else t for t in v])
        cd = getattr(trace, "customdata", None)
        if cd is not None and len(cd):
            import numpy as np

            arr = np.asarray(cd, dtype=object)
            if any(isinstance(v, str) for v in arr.ravel()[:100]):
                trace.customdata = np.vectorize(lambda v: plot_text(v) if isinstance(v, str) else v,
                                                otypes=[object])(arr)
    return fig


def html_text(x: Any) -> str:
    """Text safe in HTML (a report's every label, cell and title): markup as entities, quotes
    too, and control and bidirectional-override characters shown, as on the page.

    >>> html_text('<b a="1">x</b>\u202e')
    '&lt;b a=&quot;1&quot;&gt;x&lt;/b&gt;\\\\u202e'
    """
    import html

    return html.escape(visible(x), quote=True)


# The one stylesheet of the HTML reports (postmortem and capacity review): they open offline and
# print alike.
REPORT_CSS = """body{font-family:system-ui,-apple-system,'DejaVu Sans',Arial,sans-serif;max-width:1200px;margin:2em auto;
padding:0 1em;color:#222;line-height:1.45}table{border-collapse:collapse;margin:.6em 0 1.2em}td,th{border:1px solid #ccc;
padding:.3em .6em;text-align:left}th{background:#f3f3f3}.finding{font-size:1.15em;font-weight:600}
.badge{display:inline-block;padding:.15em .6em;border-radius:.8em;color:#fff;font-weight:600}
.flag{color:#D55E00;font-weight:700}"""


def html_table(headers: Any, rows: Any) -> list[str]:
    """An HTML table's lines, every header and cell through :func:`html_text` (a report's tables).

    >>> html_table(["team"], [["<b>ml</b>\u202e"]])
    ['<table><tr><th>team</th></tr>', '<tr><td>&lt;b&gt;ml&lt;/b&gt;\\\\u202e</td></tr>', '</table>']
    """
    out = ["<table><tr>" + "".join(f"<th>{html_text(c)}</th>" for c in headers) + "</tr>"]
    out.extend("<tr>" + "".join(f"<td>{html_text(c)}</td>" for c in row) + "</tr>" for row in rows)
    out.append("</table>")
    return out


def html_card(title: str, paragraphs: Any = (), headers: Any = None, rows: Any = None, *,
              max_rows: int = 50, notes: Any = ()) -> str:
    """A library object as a notebook shows it (its ``_repr_html_``): a title, paragraphs, one
    table (the first ``max_rows`` rows, the rest counted) and small notes, every text through
    :func:`html_text`, as the reports escape theirs.

    >>> html_card("Tail events", ["2 events"], ["id", "service"], [["ev-1", "<b>chat</b>"]])
    '<div class="tidelens"><h4>Tail events</h4><p>2 events</p><table><tr><th>id</th><th>service</th></tr><tr><td>ev-1</td><td>&lt;b&gt;chat&lt;/b&gt;</td></tr></table></div>'
    """
    out = [f'<div class="tidelens"><h4>{html_text(title)}</h4>']
    out.extend(f"<p>{html_text(p)}</p>" for p in paragraphs)
    if headers is not None:
        rows = list(rows or [])
        out.extend(html_table(headers, rows[:max_rows]))
        if len(rows) > max_rows:
            out.append(f"<p><small>{len(rows) - max_rows:,} more rows</small></p>")
    out.extend(f"<p><small>{html_text(n)}</small></p>" for n in notes)
    return "".join(out) + "</div>"


def html_frame(title: str, frame: Any, paragraphs: Any = (), *, max_rows: int = 50, notes: Any = ()) -> str:
    """:func:`html_card` of a polars frame: its columns as headers, floats rounded to 3 digits."""
    rows = [[round(v, 3) if isinstance(v, float) else ("" if v is None else v) for v in row]
            for row in frame.head(max_rows).rows()]
    more = max(0, frame.height - max_rows)
    return html_card(title, paragraphs, frame.columns, rows, max_rows=max_rows,
                     notes=[*([f"{more:,} more rows"] if more else []), *notes])


def md_table(headers: Any, rows: Any) -> list[str]:
    """A Markdown table's lines, every header and cell through :func:`md`, then a blank line."""
    out = ["| " + " | ".join(md(c) for c in headers) + " |", "|" + "---|" * len(headers)]
    out.extend("| " + " | ".join(md(c) for c in row) + " |" for row in rows)
    return out + [""]
