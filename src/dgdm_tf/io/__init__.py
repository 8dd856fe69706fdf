"""Files: atomic writes (atomic), opening a file that must be an .npz (npz_files) and the
files one workflow rule hands another (artifacts)."""
