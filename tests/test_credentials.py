"""Credentials: named secrets in the system keyring or, where none works (as on
this machine), in an encrypted file; flows name the entry, never the secret."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import keyring
import pytest
from keyring.backend import KeyringBackend
from keyring.backends import fail

from runtime import credentials
from runtime.credentials import CredentialError
from runtime.node import NodeConfigError, redact, resolve_secret
from tests.servers.llm import LlmServer


class DictKeyring(KeyringBackend):
    """A keyring backend that keeps entries in a dict: keyring's own plugin
    API, standing in for Secret Service, which cannot run in this sandbox."""

    priority = 1

    def __init__(self) -> None:
        super().__init__()
        self.entries: dict[tuple[str, str], str] = {}

    def get_password(self, service, username):
        return self.entries.get((service, username))

    def set_password(self, service, username, password):
        self.entries[(service, username)] = password

    def delete_password(self, service, username):
        del self.entries[(service, username)]


@pytest.fixture
def no_keyring(data_dir, monkeypatch):
    monkeypatch.delenv(credentials.BACKEND_ENV, raising=False)
    previous = keyring.get_keyring()
    keyring.set_keyring(fail.Keyring())
    yield data_dir
    keyring.set_keyring(previous)


@pytest.fixture
def dict_keyring(data_dir, monkeypatch):
    monkeypatch.delenv(credentials.BACKEND_ENV, raising=False)
    previous = keyring.get_keyring()
    backend = DictKeyring()
    keyring.set_keyring(backend)
    yield backend
    keyring.set_keyring(previous)


def test_without_a_keyring_entries_go_to_an_encrypted_file_only_the_user_reads(no_keyring):
    assert not credentials.uses_keyring()
    credentials.set("work smtp", "pa55-word-of-mine")
    credentials.set("openai", "sk-live-abcdef123456")
    assert credentials.list_names() == ["openai", "work smtp"]
    assert credentials.get("work smtp") == "pa55-word-of-mine"
    assert credentials.get("nothing here") is None

    enc, key = no_keyring / "credentials.enc", no_keyring / "credentials.key"
    assert stat.S_IMODE(enc.stat().st_mode) == 0o600
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    raw = enc.read_bytes()
    assert b"pa55-word-of-mine" not in raw and b"sk-live" not in raw and b"work smtp" not in raw
    note = credentials.backend_note()
    assert note.startswith("No system keyring here: stored encrypted in ")
    assert str(enc) in note and "casual" in note

    credentials.set("openai", "sk-live-replaced-999")
    assert credentials.get("openai") == "sk-live-replaced-999"
    assert credentials.delete("openai") is True
    assert credentials.delete("openai") is False
    assert credentials.list_names() == ["work smtp"]


def test_a_file_whose_key_is_gone_or_wrong_is_a_clear_error(no_keyring):
    credentials.set("a", "secret-value-1")
    (no_keyring / "credentials.key").write_bytes(b"not a fernet key\n")
    with pytest.raises(CredentialError, match="is not a credentials key"):
        credentials.get("a")
    os.unlink(no_keyring / "credentials.key")
    with pytest.raises(CredentialError, match="its key .* is missing"):
        credentials.list_names()


@pytest.mark.parametrize("name", ["", " padded", "a\nb", "x" * 129, "-starts-with-dash", None])
def test_names_that_cannot_name_an_entry_are_refused(no_keyring, name):
    with pytest.raises(CredentialError, match="cannot name a credential"):
        credentials.set(name, "value-1234")


def test_an_empty_secret_is_refused(no_keyring):
    with pytest.raises(CredentialError, match="'k': the secret is empty"):
        credentials.set("k", "")


def test_with_a_keyring_entries_go_there_under_the_switchboard_service(dict_keyring):
    assert credentials.uses_keyring()
    assert credentials.backend_note().startswith("Stored in the system keyring (")
    credentials.set("openai", "sk-in-the-keyring-42")
    assert dict_keyring.entries == {("switchboard", "openai"): "sk-in-the-keyring-42"}
    assert credentials.list_names() == ["openai"]
    index = (credentials.data_dir() / credentials.INDEX_NAME).read_text()
    assert "openai" in index and "sk-in" not in index
    assert credentials.delete("openai") is True
    assert dict_keyring.entries == {} and credentials.list_names() == []


def test_an_entry_stored_in_the_file_on_a_keyless_day_is_still_found(no_keyring):
    credentials.set("smtp", "old-file-secret")
    backend = DictKeyring()
    keyring.set_keyring(backend)
    assert credentials.get("smtp") == "old-file-secret"  # keyring first, then the file
    assert credentials.list_names() == ["smtp"]
    credentials.set("smtp", "new-keyring-secret")  # moves it to the keyring
    assert credentials.get("smtp") == "new-keyring-secret"
    keyring.set_keyring(fail.Keyring())
    assert credentials.get("smtp") is None  # the file copy went


def test_forcing_the_file_store(dict_keyring, monkeypatch):
    monkeypatch.setenv(credentials.BACKEND_ENV, "file")
    credentials.set("k", "file-only-secret")
    assert dict_keyring.entries == {}
    assert "SWITCHBOARD_CREDENTIALS=file" in credentials.backend_note()


def test_a_flow_reference_resolves_through_the_store_and_is_redacted(no_keyring):
    credentials.set("mail login", "hunter2-but-longer")
    ref = credentials.reference("mail login")
    assert ref == {"keyring": "switchboard", "username": "mail login"}
    assert resolve_secret(ref, param="password") == "hunter2-but-longer"
    assert redact("the server said hunter2-but-longer") == "the server said ***"
    with pytest.raises(NodeConfigError) as info:
        resolve_secret({"keyring": "switchboard", "username": "gone"}, param="password")
    assert str(info.value) == ("param 'password': no credential named 'gone'; add it in "
                               "Run > Credentials…")


def test_a_foreign_keyring_service_without_a_keyring_is_a_config_error(no_keyring):
    with pytest.raises(NodeConfigError, match="keyring entry other/u: the system keyring failed"):
        resolve_secret({"keyring": "other", "username": "u"}, param="password")


def test_key_configured(no_keyring, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert credentials.key_configured("scripted")
    assert not credentials.key_configured("openai")
    assert not credentials.key_configured("anthropic")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-from-env")
    assert credentials.key_configured("anthropic")
    assert credentials.default_key("anthropic") == ("sk-ant-from-env",
                                                    "environment variable ANTHROPIC_API_KEY")
    credentials.set("OpenAI", "sk-stored-for-openai")  # named like the provider, any case
    assert credentials.key_configured("openai")
    assert credentials.default_key("openai") == ("sk-stored-for-openai", "credential 'OpenAI'")


def test_list_models_of_an_openai_compatible_server():
    with LlmServer() as server:
        server.models = ["llama3.2", "qwen2.5:7b"]
        server.api_key = "sk-right-key-1234"
        assert credentials.list_models(server.openai_url, "sk-right-key-1234") == [
            "llama3.2", "qwen2.5:7b"]
        assert server.requests[-1]["path"] == "/v1/models"

        with pytest.raises(CredentialError) as info:
            credentials.list_models(server.openai_url, "sk-wrong-key-5678")
        text = str(info.value)
        assert text.startswith(f"{server.openai_url}/models: HTTP 401 (the server refused the key)")
        assert "sk-wrong-key-5678" not in text and "***" in text  # the server echoed it

        with pytest.raises(CredentialError, match=r"/nothing/models: HTTP 404 \(is this the API"):
            credentials.list_models(f"http://127.0.0.1:{server.port}/nothing", "sk-right-key-1234")
        port = server.port
    with pytest.raises(CredentialError, match=f"cannot connect to http://127.0.0.1:{port}/v1"):
        credentials.list_models(f"http://127.0.0.1:{port}/v1", "sk-any-key-0000")
    with pytest.raises(CredentialError, match="is not an http:// or https:// URL"):
        credentials.list_models("ftp://example.com", None)


# -- the agent's key ---------------------------------------------------------

def _llm_agent(llm: LlmServer, **params) -> dict:
    from tests.servers.flows import fixed

    base = {"provider": "openai", "model": "gpt-test", "base_url": llm.openai_url}
    base.update(params)
    return {k: fixed(v) for k, v in base.items()}


async def test_the_agent_uses_the_credential_it_names_and_never_shows_it(no_keyring, monkeypatch):
    from tests.servers.flows import agent_flow, run
    from tests.servers.llm import openai_reply

    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env-not-this-one")
    credentials.set("my openai", "sk-stored-credential-777")
    with LlmServer() as llm:
        llm.replies = [openai_reply("Done: sk-stored-credential-777")]
        flow = agent_flow(_llm_agent(llm, api_key=credentials.reference("my openai")), [])
        assert "sk-stored" not in flow.dumps()  # the flow names the entry only
        result, rec, _ = await run(flow)
    assert result.status == "ok"
    assert llm.requests[0]["headers"]["authorization"] == "Bearer sk-stored-credential-777"
    assert [e.value["payload"] for e in rec.of("debug")] == ["Done: ***"]


async def test_without_a_key_param_a_credential_named_like_the_provider_serves(no_keyring,
                                                                              monkeypatch):
    from tests.servers.flows import agent_flow, run
    from tests.servers.llm import openai_reply

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    credentials.set("OPENAI_API_KEY", "sk-stored-by-its-usual-name")
    with LlmServer() as llm:
        llm.replies = [openai_reply("hi")]
        result, _, _ = await run(agent_flow(_llm_agent(llm), []))
    assert result.status == "ok"
    assert llm.requests[0]["headers"]["authorization"] == "Bearer sk-stored-by-its-usual-name"


async def test_a_missing_credential_fails_the_run_naming_the_entry(no_keyring):
    from tests.servers.flows import agent_flow, run

    with LlmServer() as llm:
        result, rec, _ = await run(agent_flow(
            _llm_agent(llm, api_key=credentials.reference("typo")), []))
    assert result.status == "error"
    assert rec.of("node.error")[0].message == (
        "param 'api_key': no credential named 'typo'; add it in Run > Credentials…")
    assert llm.requests == []


def test_the_agent_groups_its_params_and_scripted_hides_the_connection():
    from nodes.ai import Agent
    from runtime.spec import ParamValue

    spec = Agent.spec
    groups = {p.name: p.group for p in spec.params}
    assert [n for n, g in groups.items() if g == ""] == [
        "provider", "model", "instructions", "prompt", "script"]
    assert [n for n, g in groups.items() if g == "connection"] == [
        "base_url", "api_key", "api_key_env"]
    assert spec.param("api_key").secret and spec.param("api_key").label == "API key"
    scripted = {"provider": ParamValue(scope="custom", value="scripted")}
    visible = [p.name for p in spec.params if spec.param_visible(p.name, scripted)]
    assert visible == ["provider", "instructions", "prompt", "script", "max_turns",
                       "tool_timeout_seconds", "max_tool_calls_per_run", "max_seconds",
                       "max_tool_calls_per_turn", "budget_usd", "budget_tokens",
                       "wake_on_background", "max_background_tasks", "block_on_start",
                       "block_on_turn", "block_on_tool", "block_on_end", "hook_timeout_seconds"]
    default = [p.name for p in spec.params if spec.param_visible(p.name, {})]
    assert "script" not in default and "api_key" in default and "base_url" in default


# -- the command line ----------------------------------------------------------

def sb(*args: str, data_dir, stdin: str = "") -> subprocess.CompletedProcess:
    env = {**os.environ, "SWITCHBOARD_DATA_DIR": str(data_dir), credentials.BACKEND_ENV: "file"}
    return subprocess.run([sys.executable, "-m", "runtime.cli", *args], input=stdin,
                          capture_output=True, text=True, timeout=60, env=env)


def test_credentials_from_the_command_line(tmp_path):
    r = sb("credentials", "set", "ollama", data_dir=tmp_path, stdin="sk-piped-in-0001\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout == ('stored ollama; a flow names it as {"keyring": "switchboard", '
                        '"username": "ollama"}\n')
    assert "sk-piped" not in r.stdout + r.stderr
    r = sb("credentials", "list", data_dir=tmp_path)
    assert r.stdout == "ollama\n" and "stored encrypted in" in r.stderr
    with LlmServer() as llm:
        llm.api_key = "sk-piped-in-0001"
        r = sb("credentials", "test", llm.openai_url, "--key", "ollama", data_dir=tmp_path)
        assert (r.returncode, r.stdout) == (0, "gpt-test\ngpt-test-mini\n")
        r = sb("credentials", "test", llm.openai_url, data_dir=tmp_path)  # no key: refused
        assert r.returncode == 1 and "HTTP 401 (the server refused the key)" in r.stderr
    r = sb("credentials", "delete", "ollama", data_dir=tmp_path)
    assert r.returncode == 0 and sb("credentials", "list", data_dir=tmp_path).stdout == ""
    r = sb("credentials", "delete", "ollama", data_dir=tmp_path)
    assert r.returncode == 2 and r.stderr == "switchboard: no credential named 'ollama'\n"


def _doc_block(lang: str) -> str:
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "credentials.md").read_text()
    section = text.split("## In flows, scripts and the command line", 1)[1].split("\n## ", 1)[0]
    return section.split(f"```{lang}\n", 1)[1].split("```", 1)[0]


def test_the_python_example_in_the_docs_runs(no_keyring, capsys):
    with LlmServer() as llm:
        llm.models = ["llama3.2"]
        llm.api_key = "sk-local-0123456789"
        code = _doc_block("python").replace("http://127.0.0.1:11434/v1", llm.openai_url)
        exec(compile(code, "docs/credentials.md", "exec"), {})
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "['ollama']" and out[1].startswith("No system keyring here")
    assert out[2:] == ["{'keyring': 'switchboard', 'username': 'ollama'}", "['llama3.2']"]
    assert credentials.list_names() == []


def test_the_command_line_example_in_the_docs_runs(tmp_path):
    import shlex

    from tests.servers.llm import openai_reply

    lines = _doc_block("bash").replace("\\\n", " ").splitlines()
    commands = [shlex.split(line.split("  #")[0]) for line in lines]
    assert [c[:3] for c in commands] == [
        ["switchboard", "credentials", "set"], ["switchboard", "credentials", "list"],
        ["switchboard", "credentials", "test"], ["switchboard", "run",
                                                 "resources/examples/email-assistant.flow.json"]]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with LlmServer() as llm:
        llm.api_key = "sk-typed-at-the-prompt"
        llm.replies = [openai_reply("Nothing to send.", model="llama3.2")]
        results = []
        for argv in commands:
            argv = [a.replace("http://127.0.0.1:11434/v1", llm.openai_url) for a in argv[1:]]
            if argv[:2] == ["run", "resources/examples/email-assistant.flow.json"]:
                argv[1] = os.path.join(root, argv[1])
                argv.append("--no-history")
            results.append(sb(*argv, data_dir=tmp_path, stdin="sk-typed-at-the-prompt\n"))
    assert [r.returncode for r in results] == [0, 0, 0, 0], [r.stderr for r in results]
    assert results[1].stdout == "ollama\n" and results[2].stdout == "gpt-test\ngpt-test-mini\n"
    chat = [r for r in llm.requests if r["kind"] == "openai"]
    assert chat[0]["headers"]["authorization"] == "Bearer sk-typed-at-the-prompt"
    assert chat[0]["body"]["model"] == "llama3.2"
    assert '"Nothing to send."' in results[3].stdout
