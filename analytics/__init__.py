"""Tidelens analytics: the library behind the app and the ``tidelens`` CLI.

Data flows one way: sources -> store (DuckDB) -> timelines -> analyses -> figures.
Nothing in this package imports streamlit.
"""

__version__ = "0.1.0"
