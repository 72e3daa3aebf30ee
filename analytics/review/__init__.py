"""The capacity-review report: one self-contained file a reviewer reads without the app.

Five sections, each with a one-sentence finding, its numbers and (where one helps) its chart:
the pool (size, GPU-hours by class, minutes over the SLO), the rhythm and the collision of
batch with the morning ramp, the tail events (causes, those a dashboard would misattribute),
the what-if (the backtest first, then the policies side by side, modelled) and the chargeback
bill (what each team would pay, by policy); then, when there is one, before and after the latest
change of policy; and last, the forecast of the collisions ahead of the range's end and the
change tonight that avoids each (modelled). Every number comes from the function the pages
use for it (:mod:`analytics.overview`, :mod:`analytics.events`, :mod:`analytics.rhythm`,
:mod:`analytics.whatif`), so the report, the pages and ``tidelens review --json`` agree.

A part the data cannot support (no latency, no batch, a store that cannot be calibrated) is
reported as missing with the reason, never filled from a preset. It is written by the one report renderer
(:mod:`analytics.document`): the HTML embeds plotly.js once and makes no external request; every
label (service, team, workload) is escaped. :mod:`.build` computes a review, :mod:`.sections` holds
and writes it.
"""

from analytics.review.build import build_review, review_store
from analytics.review.sections import STAGES, Review, review_document, review_html, review_sections, write_review

__all__ = ["STAGES", "Review", "build_review", "review_document", "review_html", "review_sections", "review_store",
           "write_review"]
