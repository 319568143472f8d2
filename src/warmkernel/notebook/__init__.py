"""Notebook binding: cell analysis, staleness and the `.ipynb` document."""
