"""Named profiles: `$XDG_CONFIG_HOME/tenure/config.toml` (else `~/.config/tenure/config.toml`)
holds `[profiles.NAME]` tables of `api` and `token_file`, one chosen with `--profile NAME` or
`TENURE_PROFILE` (else the one named `default`, when the file has it).

What a command uses, first found wins: its option (`--api`, `--token`), then the variable
(`TENURE_API`, `TENURE_TOKEN`), then the profile. A token file that its group or others may
read or write is refused, as ssh refuses such a private key: the token is an operator's whole
authority, and a file others can read has already leaked it."""

from __future__ import annotations

import os
import stat
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT = "default"
KEYS = ("api", "token_file")


class ConfigError(Exception):
    """A profile that cannot be used: `code` is stable, `message` says what to fix."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Profile:
    name: str
    source: Path  # the config file it came from
    api: str | None
    token_file: str | None  # as the file says it: `~` and a relative path resolved on reading

    @property
    def where(self) -> str:
        return f"profile {self.name!r} ({self.source})"

    def token_path(self) -> Path | None:
        """Where its token_file is: `~` is the user's home (`~user` that user's), a relative
        path is relative to the config file's folder; None when it names none. Resolved only
        when the token is to be read, so a profile whose token is given otherwise is usable."""
        if self.token_file is None:
            return None
        try:
            expanded = Path(self.token_file).expanduser()
        except RuntimeError:  # `~user` of no user this machine knows (or no home for `~`)
            home = self.token_file.split("/", 1)[0]
            raise ConfigError(
                "token_file_unreadable",
                f"{self.where}: token_file {self.token_file}: no home directory for {home}",
            ) from None
        return self.source.parent / expanded

    def token(self) -> str | None:
        """The token its token_file holds, or None when it names none."""
        path = self.token_path()
        if path is None:
            return None
        try:
            mode = path.stat().st_mode
        except OSError as err:
            raise ConfigError(
                "token_file_unreadable",
                f"{self.where}: token_file {path}: {err.strerror or err}",
            ) from err
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise ConfigError(
                "token_file_unsafe",
                f"{self.where}: token_file {path} is open to its group or others "
                f"(mode {stat.S_IMODE(mode):o}): chmod 600 {path}",
            )
        try:
            token = path.read_text().strip()
        except (OSError, UnicodeDecodeError) as err:
            raise ConfigError(
                "token_file_unreadable", f"{self.where}: token_file {path}: {err}"
            ) from err
        if not token:
            raise ConfigError("token_file_empty", f"{self.where}: {path} is empty")
        return token


def config_path(environ: dict[str, str] | None = None) -> Path:
    environ = dict(os.environ) if environ is None else environ
    base = environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "tenure" / "config.toml"


def _read(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except tomllib.TOMLDecodeError as err:
        raise ConfigError("bad_config", f"{path}: {err}") from err
    except UnicodeDecodeError as err:  # TOML is UTF-8 text; tomllib decodes before it parses
        raise ConfigError("bad_config", f"{path}: not UTF-8 text ({err})") from err
    except OSError as err:
        raise ConfigError("bad_config", f"{path}: {err.strerror or err}") from err


def load(given: str | None) -> Profile | None:
    """The profile chosen by `given` (--profile), else TENURE_PROFILE, else `default` if the
    config file has one. A profile named but not found is an error; `default` missing is not."""
    name = given or os.environ.get("TENURE_PROFILE") or None
    path = config_path()
    if not path.exists():
        if name:
            raise ConfigError("unknown_profile", f"no profile {name!r}: {path} does not exist")
        return None
    profiles = _read(path).get("profiles", {})
    if not isinstance(profiles, dict):
        raise ConfigError("bad_config", f"{path}: `profiles` must be a table of [profiles.NAME]")
    chosen = name or DEFAULT
    entry = profiles.get(chosen)
    if entry is None:
        if not name:
            return None
        known = ", ".join(sorted(profiles)) or "none"
        raise ConfigError("unknown_profile", f"no profile {name!r} in {path} (it has: {known})")
    if not isinstance(entry, dict):
        raise ConfigError("bad_config", f"{path}: profiles.{chosen} must be a table")
    unknown = sorted(set(entry) - set(KEYS))
    if unknown:
        known = "keys: api, token_file"
        raise ConfigError(
            "bad_config", f"{path}: profiles.{chosen}: unknown key {unknown[0]!r} ({known})"
        )
    for key in KEYS:
        if key in entry and not isinstance(entry[key], str):
            raise ConfigError("bad_config", f"{path}: profiles.{chosen}.{key} must be a string")
    return Profile(chosen, path, entry.get("api"), entry.get("token_file"))
