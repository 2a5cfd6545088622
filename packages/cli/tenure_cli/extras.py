"""What `tenure local` and `tenure bench` need beyond a plain install, and how to say so."""

from __future__ import annotations

import importlib.util

# Modules the `local` extra installs (moto's server, and httpx for the load generator).
LOCAL_EXTRA_MODULES = ("moto", "flask", "flask_cors", "httpx")
INSTALL_HINT = "pip install 'tenure[local]' (in a checkout: pip install -e '.[local]')"


def missing_local_extra(command: str) -> str | None:
    """The one line to print when `command` cannot run for want of the local extra, or None."""
    missing = [name for name in LOCAL_EXTRA_MODULES if importlib.util.find_spec(name) is None]
    if not missing:
        return None
    return f"{command} needs the local extra: {INSTALL_HINT} (missing: {', '.join(missing)})"
