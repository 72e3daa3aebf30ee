"""Figure builders: plain Plotly figures from analytics frames, one module per page.

Builders take frames and settings and return ``plotly.graph_objects.Figure``; they never read
the store and never import Streamlit, so a notebook or a report can use them as they are.
:mod:`analytics.charts.theme` holds what every chart shares: one colour per workload class,
a large-type template for projectors, and the chart toolbar's export settings.
"""

from analytics.charts.theme import (CLASS_COLORS, PLOTLY_CONFIG, TEMPLATE_NAME, apply_theme,
                                    class_color, display_ts, figure_image)

__all__ = ["CLASS_COLORS", "PLOTLY_CONFIG", "TEMPLATE_NAME", "apply_theme", "class_color",
           "display_ts", "figure_image"]
