"""courselib: the one library behind *All or Nothing*.

Layers point one way (see DESIGN.md §3): ``model`` (pure) <- ``sim`` (simpy) <- views
(``cli``, ``plots``, ``widgets``); ``io`` reads files into model objects; ``live`` touches
the real system. Importing ``courselib`` stays light: nothing here imports matplotlib,
simpy or ipywidgets.
"""
from courselib.errors import CourseError

__all__ = ["CourseError", "__version__"]
__version__ = "0.1.0"
