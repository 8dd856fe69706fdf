"""Files: atomic writes (atomic) and the files one workflow rule hands another (artifacts)."""
