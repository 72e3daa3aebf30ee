"""The one report renderer: a document of sections written as self-contained HTML or as Markdown.

The capacity review (:mod:`analytics.review`) and the postmortem (:mod:`analytics.postmortem`)
say different things in the same form: a heading, a lead, sections each with an optional
one-sentence finding, paragraphs, tables and a figure, then small print. What each says is theirs;
how it is written, escaped and saved is here, once. Every text is plain (escaped here: a pod named
``<script>`` stays text); figures are made safe by their producer (labels through
:func:`analytics.text.plot_text` or :func:`analytics.text.escape_figure`).

The HTML embeds plotly.js once and makes no external request; the Markdown links each figure as
a PNG written beside it (Kaleido, Debian's Chromium).

>>> doc = Document("T", "Heading", sections=[Section("One", "It <b>works</b>.", ["a|b"])])
>>> "<p class=\\"finding\\">It &lt;b&gt;works&lt;/b&gt;.</p>" in render_html(doc)
True
>>> render_markdown(doc)[0].splitlines()[2:5]
['## One', '', '**It &lt;b&gt;works&lt;/b&gt;.**']
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from analytics.charts.theme import figure_images
from analytics.errors import ConfigError
from analytics.text import REPORT_CSS, html_table, html_text, md, md_table

if TYPE_CHECKING:
    import plotly.graph_objects as go

_PLOTLY_CONFIG = {"displaylogo": False, "responsive": True}


@dataclass
class Section:
    """One section: a finding (one sentence, may be empty), paragraphs, tables and a figure.

    ``title`` is the producer's own words, never data (the Markdown writes it as it is);
    ``more_figures`` are drawn after ``figure`` in the HTML only (the Markdown links the main one).
    """

    title: str
    finding: str = ""
    paragraphs: list[str] = field(default_factory=list)
    tables: list[tuple[list[str], list[list[Any]]]] = field(default_factory=list)
    figure: "go.Figure | None" = None
    figure_name: str = ""
    more_figures: list["go.Figure"] = field(default_factory=list)


@dataclass
class Document:
    """A report: ``title`` (the browser tab), ``heading`` (with ``heading_code`` shown as code),
    ``lead`` paragraphs, an optional ``badge`` ``(label, text, colour)`` and ``flag``, the
    sections, ``notes`` (small print, each line) and a ``footer``."""

    title: str
    heading: str
    heading_code: str | None = None
    lead: list[str] = field(default_factory=list)
    badge: tuple[str, str, str] | None = None
    flag: str | None = None
    sections: list[Section] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    footer: str = ""

    def figures(self) -> list["go.Figure"]:
        """Every figure of the document, in the order it draws them (the Plotly figures the pages draw)."""
        return [f for sec in self.sections for f in ([sec.figure] if sec.figure is not None else [])
                + list(sec.more_figures)]

    def _repr_html_(self) -> str:
        """The document in a notebook cell: its text and tables, each figure named by its index
        in :meth:`figures` (a cell draws a figure itself; plotly.js is not embedded per output)."""
        # No stylesheet: the reports' would restyle the notebook's own page (its body, its tables).
        return '<div class="tidelens">' + "\n".join(_body(self, figures=False)) + "</div>"


def output_format(path: str | Path, what: str = "report") -> str:
    """``"html"`` or ``"md"`` from a file's extension (the postmortem's and the review's).

    >>> output_format("x.HTM"), output_format("notes.markdown")
    ('html', 'md')

    Raises
    ------
    ConfigError
        Any other extension, naming the file.
    """
    suffix = Path(path).suffix.lower()
    if suffix in (".html", ".htm"):
        return "html"
    if suffix in (".md", ".markdown"):
        return "md"
    raise ConfigError(f"{path}: the {what} is written as .html or .md; choose one of those extensions")


def render_html(doc: Document) -> str:
    """One self-contained HTML page: plotly.js embedded once, every text escaped."""
    return "\n".join(["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
                      f"<title>{html_text(doc.title)}</title>", f"<style>{REPORT_CSS}</style></head><body>",
                      *_body(doc, figures=True), "</body></html>"])


def _body(doc: Document, *, figures: bool) -> list[str]:
    """The page's content; without ``figures`` each figure is named where it stands (a notebook
    draws the figures themselves, :meth:`Document.figures`)."""
    heading = html_text(doc.heading) + (f" <code>{html_text(doc.heading_code)}</code>" if doc.heading_code else "")
    out = [f"<h1>{heading}</h1>"]
    out.extend(f"<p>{html_text(p)}</p>" for p in doc.lead)
    if doc.badge is not None:
        _, text, colour = doc.badge
        out.append(f'<p><span class="badge" style="background:{html_text(colour)}">{html_text(text)}</span>'
                   + (f' <span class="flag">{html_text(doc.flag)}</span>' if doc.flag else "") + "</p>")
    plotly_js = True
    drawn = 0
    for sec in doc.sections:
        out.append(f"<h2>{html_text(sec.title)}</h2>")
        if sec.finding:
            out.append(f'<p class="finding">{html_text(sec.finding)}</p>')
        out.extend(f"<p>{html_text(p)}</p>" for p in sec.paragraphs)
        for headers, rows in sec.tables:
            out.extend(html_table(headers, rows))
        for fig in ([sec.figure] if sec.figure is not None else []) + list(sec.more_figures):
            if not figures:
                out.append(f"<p><small>[figure {drawn}: <code>.figures()[{drawn}]</code>]</small></p>")
                drawn += 1
                continue
            out.append(fig.to_html(include_plotlyjs=plotly_js, full_html=False, config=_PLOTLY_CONFIG,
                                   include_mathjax=False))
            plotly_js = False
    out.extend(f"<p><small>{html_text(n)}</small></p>" for n in doc.notes)
    if doc.footer:
        out.append(f"<p><small>{html_text(doc.footer)}</small></p>")
    return out


def render_markdown(doc: Document, *, image_prefix: str | None = None) -> tuple[str, list[tuple[str, "go.Figure"]]]:
    """Markdown text and the figures it links (``(file name, figure)``, to be written beside it);
    with ``image_prefix=None`` the figures are left out."""
    heading = md(doc.heading) + (f" `{doc.heading_code}`" if doc.heading_code else "")
    out = [f"# {heading}", ""]
    for p in doc.lead:
        out += [md(p), ""]
    if doc.badge is not None:
        label, text, _ = doc.badge
        out += [f"**{md(label)}: {md(text)}**" + (f" — **{md(doc.flag)}**" if doc.flag else ""), ""]
    images: list[tuple[str, Any]] = []
    for sec in doc.sections:
        out += [f"## {sec.title}", ""]  # titles are ours
        if sec.finding:
            out += [f"**{md(sec.finding)}**", ""]
        for p in sec.paragraphs:
            out += [md(p), ""]
        for headers, rows in sec.tables:
            out.extend(md_table(headers, rows))
        if sec.figure is not None and image_prefix is not None:
            name = f"{image_prefix}-{sec.figure_name or 'figure'}.png"
            images.append((name, sec.figure))
            out += [f"![{sec.title}]({name})", ""]
    out += [f"_{md(n)}_" for n in doc.notes] + ([""] if doc.notes else [])
    if doc.footer:
        out += [f"_{md(doc.footer)}_", ""]
    return "\n".join(out), images


def write_document(doc: Document, path: str | Path, what: str = "report") -> list[Path]:
    """Write ``doc`` to ``path`` (``.html``, or ``.md`` with its figures as PNGs beside it);
    returns every file written.

    Raises
    ------
    ConfigError
        Any other extension.
    """
    p = Path(path)
    if output_format(p, what) == "html":
        p.write_text(render_html(doc), encoding="utf-8")
        return [p]

    text, images = render_markdown(doc, image_prefix=p.stem)
    pngs = [p.with_name(name) for name, _ in images]
    figure_images([fig.update_layout(width=1500) for _, fig in images], pngs, "png", scale=1.5)
    p.write_text(text, encoding="utf-8")
    return [p, *pngs]
