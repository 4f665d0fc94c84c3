"""Part of the transformers stand-in (see ../__init__.py)."""
