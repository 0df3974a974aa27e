"""Interactive views for a reader without a kernel: courselib's numbers, precomputed over a grid.

The website is static: a reader who never starts Binder still gets the cost calculator and the
gang-deadlock race. At book-build time :mod:`courselib.static.views` runs the same model and
simulation a kernel would, over every setting the page's controls can take, and the page's small
JavaScript (``book/_ext/static/course-views.js``) only looks the answer up. courselib stays the
single source of every number shown.
"""
