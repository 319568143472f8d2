"""warmkernel: a persistent, observable IPython kernel for AI coding agents."""

__version__ = "0.1.0"
