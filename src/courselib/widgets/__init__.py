"""Interactive playgrounds (ipywidgets), imported lazily by the notebooks."""
