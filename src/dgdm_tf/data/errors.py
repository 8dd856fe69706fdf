"""The data layer's errors: each message says what to do."""

from __future__ import annotations


class DatasetMissingError(RuntimeError):
    """The raw data are not there and cannot be fetched; the message says how to get them."""


class DataValidationError(ValueError):
    """The data (or a data key of the config) are unusable; the message says what to fix."""


class ChecksumMismatchError(DataValidationError):
    """A downloaded or provided file does not have the expected sha256 (or size)."""


class PreprocessingNotImplementedError(NotImplementedError):
    """The raw data are present, but this dataset's preprocessing is not written yet."""
