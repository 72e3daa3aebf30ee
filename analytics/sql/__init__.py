"""Every SQL statement Tidelens runs, as named constants with ``$params``.

One module per domain (``store``, ``timeline``, ...). Values are always bound as parameters,
never formatted into the text.
"""
