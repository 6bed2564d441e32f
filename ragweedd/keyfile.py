"""The API keys file: how provider keys reach a daemon that does not see the user's shell.

A systemd user service or a launchd agent starts without the variables a login shell exports, so
``ANTHROPIC_API_KEY`` in ``~/.bashrc`` never reaches it. ``ragweedctl keys set PROVIDER`` writes the
key to ``keys.toml`` beside the default config file (``~/.config/ragweedd/keys.toml`` on Linux,
``~/Library/Application Support/ragweedd/keys.toml`` on macOS), mode 0600, and the daemon reads it
each time it builds a provider, so a key set or removed applies to the next answer without a restart.

A key is taken from, first to last: the config file (``llm.<provider>_api_key``), the environment
(``ANTHROPIC_API_KEY``...), this file. A file that group or others may read is not used at all (as
ssh refuses a private key others can read): the error says so, with the chmod that fixes it.

Standard library and ragweedd.errors only: ragweedctl imports it, and must start fast.
"""

from __future__ import annotations

import os
import stat

from ragweedd.errors import KeyFileError

TYPE_CHECKING = False
if TYPE_CHECKING:  # pathlib loads with ragweedd.paths, only when the file is actually used
    from pathlib import Path

    from ragweedd.config import Config

# provider -> the environment variables that carry its key (ollama takes none)
KEY_PROVIDERS: dict[str, tuple[str, ...]] = {
    "anthropic": ("ANTHROPIC_API_KEY",),
    "openai": ("OPENAI_API_KEY",),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
}
FILE_NAME = "keys.toml"
_SET = "ragweedctl keys set PROVIDER"
MAX_BYTES = 1 << 20  # a keys file is a few lines; anything larger is not one


def keys_file() -> Path:
    """The OS config dir's ragweedd/keys.toml, whatever --config or RAGWEED_CONFIG say: ragweedctl,
    which does not read the daemon's config, and the daemon must agree on it without being told."""
    import sys
    from pathlib import Path

    from ragweedd.paths import APP, _xdg

    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / APP / FILE_NAME
    return _xdg("XDG_CONFIG_HOME", ".config") / APP / FILE_NAME


def unknown_provider(name: str) -> str:
    return (f"unknown provider {name!r}; keys are kept for {', '.join(KEY_PROVIDERS)} "
            "(ollama needs no key)")


def check_mode(path: Path, st: os.stat_result) -> None:
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o077:
        raise KeyFileError(f"{path} may be read by group or others (mode {mode:04o}), so its keys are not used",
                           hint=f"run `chmod 600 {path}`")
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        raise KeyFileError(f"{path} belongs to another user (uid {st.st_uid}), so its keys are not used",
                           hint=f"remove it and set the keys again with `{_SET}`")


def read_keys(path: Path | None = None) -> dict[str, str]:
    """The keys in the file ({} when there is none); KeyFileError when it exists but is unusable."""
    path = path or keys_file()
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return {}
    except OSError as e:
        raise KeyFileError(f"cannot read {path}: {e.strerror}",
                           hint="make it a file you can read, or remove it and set the keys again with "
                                f"`{_SET}`") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise KeyFileError(f"{path} is not a regular file", hint=f"remove it and set the keys again with `{_SET}`")
        check_mode(path, st)
        data = os.read(fd, MAX_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_BYTES:
        raise KeyFileError(f"{path} is larger than {MAX_BYTES} bytes; it is not a keys file",
                           hint=f"remove it and set the keys again with `{_SET}`")
    import tomllib

    try:
        doc = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        # the message never quotes the file's text: it holds secrets
        raise KeyFileError(f"{path} is not valid TOML ({type(e).__name__})",
                           hint=f"fix it, or remove it and set the keys again with `{_SET}`") from None
    keys: dict[str, str] = {}
    for name, value in doc.items():
        if name not in KEY_PROVIDERS:
            raise KeyFileError(f"{path}: {unknown_provider(name)}", hint=f"remove the line of {name} from it")
        if not isinstance(value, str) or not value.strip():
            raise KeyFileError(f"{path}: the key of {name} must be a non-empty string",
                               hint=f"set it again with `ragweedctl keys set {name}`")
        keys[name] = value.strip()
    return keys


def write_keys(keys: dict[str, str], path: Path | None = None) -> Path:
    """Replace the file with ``keys``, atomically and 0600 from its first byte (never a moment in
    which another user could read it); the directory is created 0700 if missing."""
    import json

    path = path or keys_file()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    lines = ["# API keys for ragweedd, written by `ragweedctl keys`; keep this file mode 0600."]
    # a JSON string with ASCII escapes is a valid TOML basic string
    lines += [f"{name} = {json.dumps(keys[name])}" for name in sorted(keys)]
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        os.fchmod(fd, 0o600)  # whatever the umask
        os.write(fd, ("\n".join(lines) + "\n").encode("utf-8"))
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    os.close(fd)
    os.replace(tmp, path)
    return path


# What `[llm] synthesis` names when a provider's key is the only thing set: a current model of each
# provider that answers well at a moderate price (any other model id of the provider works).
SUGGESTED_SYNTHESIS = {
    "anthropic": "anthropic:claude-sonnet-4-5",
    "openai": "openai:gpt-4.1-mini",
    "gemini": "gemini:gemini-2.5-flash",
}


def providers_with_keys(cfg: Config | None, env: dict[str, str] | os._Environ[str],
                        stored: dict[str, str]) -> list[str]:
    """The providers whose key the daemon would find (config, environment or the keys file)."""
    found = []
    for provider, names in KEY_PROVIDERS.items():
        if (cfg is not None and getattr(cfg, f"llm_{provider}_api_key", None)) or any(env.get(n) for n in names) \
                or provider in stored:
            found.append(provider)
    return found


def synthesis_missing(cfg: Config | None, env: dict[str, str] | os._Environ[str]) -> str | None:
    """Why answers are quoted passages rather than written by an LLM, and what to set (None when a
    synthesis model is configured): whether a key is stored, which config file to edit, the line."""
    if getattr(cfg, "llm_synthesis", ""):
        return None
    try:
        stored = read_keys()
    except KeyFileError:
        stored = {}
    keyed = providers_with_keys(cfg, env, stored)
    source = str(getattr(cfg, "source", ""))
    if source and not source.startswith("<"):
        where = f"in {source}"
    else:
        from ragweedd.paths import default_config_file

        where = f"in {default_config_file()} (no config file is read now)"
    if keyed:
        line = f'[llm] synthesis = "{SUGGESTED_SYNTHESIS[keyed[0]]}"'
        return (f"no LLM writes answers: a key for {', '.join(keyed)} is set, but [llm] synthesis is empty. "
                f"Set {line} {where} and restart the daemon")
    return ("no LLM writes answers: no provider key is set and [llm] synthesis is empty. Store a key with "
            "`ragweedctl keys set anthropic` (or openai, gemini), or run a local model with Ollama and set "
            f'[llm] synthesis = "ollama:gemma3:4b" {where}; then restart the daemon')
