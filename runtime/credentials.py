"""Named secrets (API keys, passwords) kept out of flow files.

A flow names an entry, ``{"keyring": "switchboard", "username": NAME}``, and
never holds the secret. Entries live in the system keyring (Secret Service,
macOS Keychain, Windows Credential Manager) through the ``keyring`` library,
under the service ``switchboard`` with the entry's name as username. Where no
keyring backend works (a headless Linux box, a container), they live in
``$SWITCHBOARD_DATA_DIR/credentials.enc``, encrypted with Fernet under a key
kept beside it in ``credentials.key`` (mode 0600). That keeps the secrets
from a casual look at the data folder or a backup, not from someone who can
read the user's files: the key sits next to the data.

A keyring cannot list its entries, so the names of the ones stored there are
kept in ``credentials-names.json`` (names only, never values) for
``list_names()``.

``SWITCHBOARD_CREDENTIALS=file`` uses the encrypted file even where a
keyring works (a server whose keyring would prompt; tests).
"""

from __future__ import annotations

import builtins
import json
import os
import re
import threading
from pathlib import Path
from typing import Any

from .paths import data_dir, write_atomic_bytes

SERVICE = "switchboard"
BACKEND_ENV = "SWITCHBOARD_CREDENTIALS"
FILE_NAME = "credentials.enc"
KEY_NAME = "credentials.key"
INDEX_NAME = "credentials-names.json"
#: Names an entry may have: what a person types, with room for "work smtp"
#: or "openai@home", and nothing that would not survive a keyring's username.
NAME_PATTERN = re.compile(r"^[\w][\w .@:+/-]{0,127}$")
MAX_VALUE_CHARS = 64 * 1024
MAX_ENTRIES = 1000

#: The environment variable each LLM provider's key is read from by default;
#: a stored credential of the same name (or of the provider's own name) serves
#: the same purpose without restarting the designer from a shell.
DEFAULT_KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
#: Providers that need no key at all.
KEYLESS_PROVIDERS = {"scripted"}

_lock = threading.RLock()


class CredentialError(Exception):
    """A credential cannot be stored, read or deleted; the text says why and
    names the entry, never its value."""


# -- where entries live -----------------------------------------------------

def _forced_file() -> bool:
    return os.environ.get(BACKEND_ENV, "").strip().lower() == "file"


def _keyring():
    """The keyring backend in use if it can store anything, else None (the
    ``fail`` and ``null`` backends, or a chainer holding no backend)."""
    if _forced_file():
        return None
    try:
        import keyring
        from keyring.backends import chainer, fail, null

        backend = keyring.get_keyring()
    except Exception:  # noqa: BLE001 - a broken keyring install: use the file
        return None
    if isinstance(backend, (fail.Keyring, null.Keyring)):
        return None
    if isinstance(backend, chainer.ChainerBackend) and not backend.backends:
        return None
    return backend


def _backend_label(backend: Any) -> str:
    module = type(backend).__module__
    for key, label in (("SecretService", "Secret Service"), ("libsecret", "Secret Service"),
                       ("kwallet", "KWallet"), ("macOS", "macOS Keychain"),
                       ("Windows", "Windows Credential Manager")):
        if key in module:
            return label
    if type(backend).__name__ == "ChainerBackend":
        inner = getattr(backend, "backends", [])
        if inner:
            return _backend_label(inner[0])
    return str(getattr(backend, "name", type(backend).__name__))


def file_path() -> Path:
    return data_dir() / FILE_NAME


def key_path() -> Path:
    return data_dir() / KEY_NAME


def uses_keyring() -> bool:
    """Whether new entries go to the system keyring (else the encrypted file)."""
    return _keyring() is not None


def backend_note() -> str:
    """One sentence for the Credentials dialog: where entries are stored."""
    backend = _keyring()
    if backend is not None:
        return f"Stored in the system keyring ({_backend_label(backend)})."
    why = ("SWITCHBOARD_CREDENTIALS=file is set" if _forced_file()
           else "No system keyring here")
    return (f"{why}: stored encrypted in {file_path()}. The key is kept beside it, so this "
            "protects against a casual look, not against someone who can use your account.")


# -- the encrypted file -----------------------------------------------------

def _write_private(path: Path, data: bytes) -> None:
    """Atomically, readable by the user alone from the first byte on."""
    write_atomic_bytes(path, data, 0o600)


def _fernet(create: bool):
    from cryptography.fernet import Fernet

    path = key_path()
    try:
        key = path.read_bytes().strip()
    except FileNotFoundError:
        if not create:
            return None
        key = Fernet.generate_key()
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another process made it meanwhile: use theirs
            key = path.read_bytes().strip()
        else:
            with os.fdopen(fd, "wb") as fh:
                fh.write(key + b"\n")
    except OSError as exc:
        raise CredentialError(f"cannot read the credentials key {path}: {exc.strerror}") from None
    try:
        return Fernet(key)
    except ValueError:
        raise CredentialError(f"{path} is not a credentials key (damaged?); move it away "
                              f"together with {file_path()} to start afresh") from None


def _read_file() -> dict[str, str]:
    path = file_path()
    try:
        token = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise CredentialError(f"cannot read {path}: {exc.strerror}") from None
    fernet = _fernet(create=False)
    if fernet is None:
        raise CredentialError(f"{path} exists but its key {key_path()} is missing: the "
                              "stored credentials cannot be read")
    from cryptography.fernet import InvalidToken

    try:
        data = json.loads(fernet.decrypt(token))
    except (InvalidToken, ValueError):
        raise CredentialError(f"{path} cannot be decrypted with {key_path()} (damaged, or "
                              "the key was replaced)") from None
    secrets = data.get("secrets") if isinstance(data, dict) else None
    if not isinstance(secrets, dict):
        raise CredentialError(f"{path}: not a credentials file")
    return {k: v for k, v in secrets.items() if isinstance(k, str) and isinstance(v, str)}


def _write_file(secrets: dict[str, str]) -> None:
    fernet = _fernet(create=True)
    data = json.dumps({"format": 1, "secrets": secrets}, ensure_ascii=False).encode("utf-8")
    try:
        _write_private(file_path(), fernet.encrypt(data))
    except OSError as exc:
        raise CredentialError(f"cannot write {file_path()}: {exc.strerror}") from None


# -- the names of keyring entries -------------------------------------------

def _index_path() -> Path:
    return data_dir() / INDEX_NAME


def _read_index() -> list[str]:
    try:
        names = json.loads(_index_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [n for n in names if isinstance(n, str)] if isinstance(names, list) else []


def _write_index(names: list[str]) -> None:
    text = json.dumps(sorted(dict.fromkeys(names)), ensure_ascii=False, indent=2) + "\n"
    try:
        _write_private(_index_path(), text.encode("utf-8"))
    except OSError as exc:
        raise CredentialError(f"cannot write {_index_path()}: {exc.strerror}") from None


# -- the API ----------------------------------------------------------------

def check_name(name: Any) -> str:
    """``name`` if it can name an entry, else CredentialError saying why."""
    if not isinstance(name, str) or not NAME_PATTERN.match(name) or name != name.strip():
        raise CredentialError(
            f"{name!r} cannot name a credential: use 1 to 128 letters, digits, spaces or "
            ". _ @ : + / -, starting with a letter or digit")
    return name


def list_names() -> list[str]:
    """The names of the stored entries (never their values), sorted."""
    with _lock:
        names = builtins.set(_read_index()) if _keyring() is not None else builtins.set()
        if file_path().exists():
            names |= builtins.set(_read_file())
        return sorted(names, key=str.casefold)


def get(name: str) -> str | None:
    """The secret stored as ``name``: the keyring first, then the file; None
    when there is no such entry."""
    with _lock:
        backend = _keyring()
        if backend is not None:
            try:
                value = backend.get_password(SERVICE, name)
            except Exception as exc:  # noqa: BLE001 - a locked or absent keyring daemon
                raise CredentialError(f"credential '{name}': the system keyring failed: "
                                      f"{type(exc).__name__}: {exc}") from None
            if value is not None:
                return value
        if file_path().exists():
            return _read_file().get(name)
        return None


def set(name: str, value: str) -> None:  # noqa: A001 - the store's verb, as in keyring
    """Store ``value`` as ``name``, replacing what was there."""
    check_name(name)
    if not isinstance(value, str) or not value:
        raise CredentialError(f"credential '{name}': the secret is empty")
    if len(value) > MAX_VALUE_CHARS:
        raise CredentialError(f"credential '{name}': the secret is over "
                              f"{MAX_VALUE_CHARS // 1024} KB")
    with _lock:
        backend = _keyring()
        if backend is not None:
            names = _read_index()
            if name not in names and len(names) >= MAX_ENTRIES:
                raise CredentialError(f"more than {MAX_ENTRIES} credentials; delete some first")
            try:
                backend.set_password(SERVICE, name, value)
            except Exception as exc:  # noqa: BLE001
                raise CredentialError(f"credential '{name}': the system keyring refused to "
                                      f"store it: {type(exc).__name__}: {exc}") from None
            _write_index([*names, name])
            _forget_in_file(name)  # a stale copy from a keyless day must not linger
            return
        secrets = _read_file()
        if name not in secrets and len(secrets) >= MAX_ENTRIES:
            raise CredentialError(f"more than {MAX_ENTRIES} credentials; delete some first")
        secrets[name] = value
        _write_file(secrets)


def delete(name: str) -> bool:
    """Remove the entry ``name`` wherever it is; False if there was none."""
    with _lock:
        found = False
        backend = _keyring()
        if backend is not None:
            names = _read_index()
            try:
                if backend.get_password(SERVICE, name) is not None:
                    backend.delete_password(SERVICE, name)
                    found = True
            except Exception as exc:  # noqa: BLE001
                raise CredentialError(f"credential '{name}': the system keyring failed: "
                                      f"{type(exc).__name__}: {exc}") from None
            if name in names:
                _write_index([n for n in names if n != name])
        return _forget_in_file(name) or found


def _forget_in_file(name: str) -> bool:
    if not file_path().exists():
        return False
    secrets = _read_file()
    if name not in secrets:
        return False
    del secrets[name]
    _write_file(secrets)
    return True


def reference(name: str) -> dict[str, str]:
    """What a flow stores to name the entry: the secret param's value."""
    return {"keyring": SERVICE, "username": check_name(name)}


# -- LLM provider keys ------------------------------------------------------

def default_key_names(provider: str) -> list[str]:
    """The credential names that serve as ``provider``'s key when a node names
    none: its usual environment variable's name and the provider's own name."""
    env = DEFAULT_KEY_ENV.get(provider)
    return [env, provider] if env else []


def default_key(provider: str) -> tuple[str, str] | None:
    """``(key, where)`` for a provider whose node names no key: the usual
    environment variable, then a credential named like it or like the
    provider (``OPENAI_API_KEY`` or ``openai``), matched without regard to
    case; None if there is none. ``where`` names the source for messages."""
    env = DEFAULT_KEY_ENV.get(provider)
    if env and os.environ.get(env):
        return os.environ[env], f"environment variable {env}"
    wanted = {n.casefold() for n in default_key_names(provider)}
    if not wanted:
        return None
    try:
        for name in list_names():
            if name.casefold() in wanted:
                value = get(name)
                if value:
                    return value, f"credential '{name}'"
    except CredentialError:
        return None
    return None


def key_configured(provider: str) -> bool:
    """Whether an agent on ``provider`` with no key param set can run: the
    provider needs no key, its usual environment variable is set, or a
    credential is named like it (see default_key). The designer asks this
    when an agent is dropped, to start it on the scripted provider if not."""
    if provider in KEYLESS_PROVIDERS:
        return True
    return default_key(provider) is not None


# -- Test connection --------------------------------------------------------

def list_models(base_url: str, api_key: str | None = None, *, timeout: float = 10.0) -> list[str]:
    """The model ids an OpenAI-compatible server offers (``GET {base_url}/models``
    through the official SDK); ``base_url`` empty: OpenAI itself. Raises
    CredentialError naming the URL and the HTTP status, never the key."""
    import openai

    url = (base_url or "https://api.openai.com/v1").rstrip("/")
    if not re.match(r"^https?://[^\s/]+", url):
        raise CredentialError(f"{url!r} is not an http:// or https:// URL")
    key = api_key or "no-key"  # a local server may need none; the SDK insists on some value

    def hide(text: str) -> str:
        return text.replace(key, "***") if len(key) >= 4 else text

    where = f"{url}/models"
    try:
        with openai.OpenAI(base_url=url, api_key=key, timeout=timeout, max_retries=0) as client:
            models = [m.id for m in client.models.list()]
    except openai.APIStatusError as exc:
        detail = _error_detail(exc)
        hint = {401: " (the server refused the key)", 403: " (the key may not list models)",
                404: " (is this the API's base URL? it usually ends in /v1)"}.get(
                    exc.status_code, "")
        raise CredentialError(hide(f"{where}: HTTP {exc.status_code}{hint}"
                                   + (f": {detail}" if detail else ""))) from None
    except openai.APITimeoutError:
        raise CredentialError(f"{where}: no answer within {timeout:g} s") from None
    except openai.APIConnectionError as exc:
        cause = re.sub(r"^\[Errno -?\d+\] ", "", str(exc.__cause__ or exc))
        raise CredentialError(hide(f"cannot connect to {url}: {cause}")) from None
    except openai.OpenAIError as exc:
        raise CredentialError(hide(f"{where}: {exc}")) from None
    return sorted(dict.fromkeys(str(m) for m in models))


def _error_detail(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        message = err.get("message") if isinstance(err, dict) else err
        if message:
            return " ".join(str(message).split())[:300]
    return ""
