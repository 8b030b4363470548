"""capaudit: audit image-caption datasets for gender bias and object hallucination."""

__version__ = "0.1.0"
