"""Argument checks shared by the package's classes: each error names the argument at fault."""

import numbers
import os


def check_int(owner, name, value, least=0, most=None):
    """Return ``value`` as an int of at least ``least`` (and at most ``most``)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{owner}: {name} must be an int, not {type(value).__name__}")
    value = int(value)
    if value < least:
        raise ValueError(f"{owner}: {name} must be at least {least}, not {value}")
    if most is not None and value > most:
        raise ValueError(f"{owner}: {name} must be at most {most}, not {value}")
    return value


def check_real(owner, name, value, positive=False):
    """Return ``value`` as a finite float (positive if asked)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{owner}: {name} must be a number, not {type(value).__name__}")
    value = float(value)
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError(f"{owner}: {name} must be finite, not {value}")
    if positive and value <= 0:
        raise ValueError(f"{owner}: {name} must be positive, not {value}")
    return value


def check_bool(owner, name, value):
    """Return ``value`` if it is a bool."""
    if not isinstance(value, bool):
        raise TypeError(f"{owner}: {name} must be True or False, not {value!r}")
    return value


def check_choice(owner, name, value, choices):
    """Return ``value`` if it is one of ``choices`` (strings)."""
    if not isinstance(value, str) or value not in choices:
        listed = ", ".join(repr(choice) for choice in choices)
        raise ValueError(f"{owner}: {name} must be one of {listed}, not {value!r}")
    return value


def check_pair(owner, name, value, check=check_real, **limits):
    """Return ``value`` as a tuple of two checked numbers."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__") or len(value) != 2:
        raise TypeError(f"{owner}: {name} must be a pair of numbers, not {value!r}")
    return tuple(check(owner, name, each, **limits) for each in value)


def check_size(owner, name, value):
    """Return an output size, an int or (height, width), as (height, width)."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        side = check_int(owner, name, value, least=1)
        return side, side
    return check_pair(owner, name, value, check=check_int, least=1)


def check_triple(owner, name, value, positive=False):
    """Return ``value`` as three finite floats, one per channel."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__") or len(value) != 3:
        raise TypeError(f"{owner}: {name} must hold three numbers, one per channel, "
                        f"not {value!r}")
    return tuple(check_real(owner, name, each, positive=positive) for each in value)


def check_path(owner, name, value, folder=None):
    """Return ``value`` as a str path that exists: a folder (``folder`` True), a file (False),
    or either (None)."""
    if not isinstance(value, (str, bytes, os.PathLike)):
        raise TypeError(f"{owner}: {name} must be a path, not {type(value).__name__}")
    path = os.fsdecode(os.fspath(value))
    if not os.path.exists(path):
        raise FileNotFoundError(2, f"{owner}: {name} does not exist", path)
    if folder is True and not os.path.isdir(path):
        raise NotADirectoryError(20, f"{owner}: {name} is not a folder", path)
    if folder is False and os.path.isdir(path):
        raise IsADirectoryError(21, f"{owner}: {name} is a folder, not a file", path)
    return path
