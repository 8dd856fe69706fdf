"""Files: atomic writes."""
