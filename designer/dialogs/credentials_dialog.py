"""Run > Credentials…: the API keys and passwords a flow may name.

The dialog lists the stored names, never a value: a secret is typed once
into a password field, stored through ``runtime.credentials`` (the system
keyring, or an encrypted file where there is none, as the dialog says), and
from then on a flow refers to it by name, as
``{"keyring": "switchboard", "username": NAME}``. "Test connection" asks an
OpenAI-compatible server for its models with one of the stored keys, on a
worker thread, so a slow or dead server never freezes the window."""

from __future__ import annotations

import asyncio
import inspect
import threading
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMessageBox,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from ..look import theme

SERVICE = "switchboard"
NO_KEY = "(no key)"
MAX_NAME = 128
DEFAULT_BASE_URL = "https://api.openai.com/v1"


def keyring_ref(name: str) -> dict[str, str]:
    """What a flow stores for a secret param that names a stored credential."""
    return {"keyring": SERVICE, "username": name}


def open_credentials_dialog(parent: QWidget | None = None,
                            select: str | None = None) -> str | None:
    """Open the Credentials dialog modally, to pick (or first add) a stored
    credential. ``select`` preselects a stored name (the one the param uses
    now). Returns the name the user chose with "Use", or None if they closed
    the dialog; the caller then sets its param to
    ``keyring_ref(name)`` = ``{"keyring": "switchboard", "username": name}``."""
    dialog = CredentialsDialog(parent, select=select, choose=True)
    try:
        accepted = dialog.exec() == QDialog.DialogCode.Accepted
        return dialog.chosen_name() if accepted else None
    finally:
        dialog.deleteLater()


@dataclass(frozen=True)
class Connection:
    """What "Use" chose for an agent: the stored key's name, and, when Test
    connection answered, the server it asked ("" for the provider's own)
    and the model picked from its list (None: leave the agent's as it is)."""

    name: str
    base_url: str | None = None
    model: str | None = None

    def describe(self) -> str:
        """"credential local, base URL http://…/v1, model llama3"."""
        parts = [f"credential {self.name}"]
        if self.base_url is not None:
            parts.append(f"base URL {self.base_url or 'the provider’s own'}")
        if self.model:
            parts.append(f"model {self.model}")
        return ", ".join(parts)


def choose_connection(parent: QWidget | None = None, select: str | None = None,
                      base_url: str = "", model: str = "") -> Connection | None:
    """The Credentials dialog for an agent, modal: Test connection starts at
    the agent's ``base_url`` and preselects its ``model`` in the list;
    "Use" returns the stored key's name with the tested server and the
    picked model (Connection), None if the dialog was closed."""
    dialog = CredentialsDialog(parent, select=select, choose=True)
    if base_url:
        dialog.base_url_edit.setText(base_url)
    dialog.wanted_model = model
    try:
        accepted = dialog.exec() == QDialog.DialogCode.Accepted
        return dialog.connection() if accepted else None
    finally:
        dialog.deleteLater()


def _default_store():
    from runtime import credentials

    return credentials


def name_problem(name: str, store: Any = None) -> str | None:
    """Why ``name`` cannot name a credential, or None; the store's own rule
    (``check_name``) where it has one."""
    if not name:
        return "Give the credential a name, e.g. openai."
    check = getattr(store, "check_name", None)
    if check is not None:
        try:
            check(name)
        except Exception as exc:
            return str(exc)
        return None
    if name != name.strip() or len(name) > MAX_NAME or not name.isprintable():
        return f"A name is one line of at most {MAX_NAME} characters, without spaces around it."
    return None


class _Relay(QObject):
    """Carries a worker thread's answer to the GUI thread (a queued signal)."""

    done = Signal(int, object, str)  # request number, models, error


class CredentialsDialog(QDialog):
    """``choose=True`` adds a "Use" button (for a param that needs a
    credential); from the menu it only manages them. ``store`` is the
    ``runtime.credentials`` module, or anything with its functions."""

    #: After a Test connection answers: (models, error); one of them is empty.
    test_finished = Signal(list, str)

    def __init__(self, parent: QWidget | None = None, *, select: str | None = None,
                 choose: bool = False, store: Any = None) -> None:
        super().__init__(parent)
        self.setObjectName("credentialsDialog")
        self.setWindowTitle("Credentials")
        self.store = store if store is not None else _default_store()
        self._request = 0
        #: The base URL the last Test connection got models from (None: none yet).
        self._tested_url: str | None = None
        #: The model to preselect when the server lists it (the agent's own).
        self.wanted_model = ""
        self._testing: tuple[str, str | None] = ("", None)  # (base URL, key) being tested
        self._relay = _Relay()
        self._relay.done.connect(self._on_test_done)

        layout = QVBoxLayout(self)
        layout.setSpacing(10)
        intro = QLabel("API keys and passwords for your flows. A flow stores only the name "
                       "you give here, never the secret, so it can be shared safely.", self)
        intro.setWordWrap(True)
        layout.addWidget(intro)

        body = QHBoxLayout()
        body.setSpacing(12)
        stored_box = QGroupBox("Stored", self)
        left = QVBoxLayout(stored_box)
        self.names = QListWidget(self)
        self.names.setObjectName("credentialNames")
        self.names.setMinimumWidth(190)
        self.names.currentItemChanged.connect(self._on_current)
        self.names.itemDoubleClicked.connect(lambda _item: self._use_if_choosing())
        left.addWidget(self.names, 1)
        self.empty_label = QLabel("Nothing stored yet: add a key on the right.", self)
        self.empty_label.setWordWrap(True)
        self.empty_label.setStyleSheet("color: palette(placeholder-text);")
        left.addWidget(self.empty_label)
        row = QHBoxLayout()
        self.replace_button = QPushButton("Replace…", self)
        self.replace_button.setToolTip("Type a new secret for the selected name")
        self.replace_button.clicked.connect(lambda: self.start_replace())
        self.delete_button = QPushButton("Delete…", self)
        self.delete_button.clicked.connect(lambda: self.delete_selected())
        row.addWidget(self.replace_button)
        row.addWidget(self.delete_button)
        left.addLayout(row)
        body.addWidget(stored_box, 2)

        right = QVBoxLayout()
        right.setSpacing(10)
        add_box = QGroupBox("Add or replace", self)
        form = QFormLayout(add_box)
        self.name_edit = QLineEdit(add_box)
        self.name_edit.setObjectName("credentialName")
        self.name_edit.setPlaceholderText("e.g. openai")
        self.name_edit.setMaxLength(MAX_NAME)
        self.secret_edit = QLineEdit(add_box)
        self.secret_edit.setObjectName("credentialSecret")
        self.secret_edit.setEchoMode(QLineEdit.EchoMode.Password)
        self.secret_edit.setPlaceholderText("the API key or password")
        form.addRow("Name", self.name_edit)
        form.addRow("Secret", self.secret_edit)
        self.store_button = QPushButton("Store", add_box)
        self.store_button.setObjectName("storeButton")
        self.store_button.clicked.connect(lambda: self.store_entered())
        self.form_message = QLabel(add_box)
        self.form_message.setWordWrap(True)
        form.addRow("", self.store_button)
        form.addRow("", self.form_message)
        self.name_edit.textChanged.connect(self._update_form)
        self.secret_edit.textChanged.connect(self._update_form)
        self.name_edit.returnPressed.connect(self.secret_edit.setFocus)
        self.secret_edit.returnPressed.connect(lambda: self.store_entered())
        self.defaults_note = QLabel(
            "An agent that names no key uses the one stored as <b>openai</b> (or "
            "OPENAI_API_KEY), or <b>anthropic</b> for Anthropic.", add_box)
        self.defaults_note.setWordWrap(True)
        self.defaults_note.setStyleSheet("color: palette(placeholder-text);")
        form.addRow(self.defaults_note)
        right.addWidget(add_box)

        test_box = QGroupBox("Test connection", self)
        tform = QFormLayout(test_box)
        self.base_url_edit = QLineEdit(DEFAULT_BASE_URL, test_box)
        self.base_url_edit.setObjectName("baseUrl")
        self.base_url_edit.setToolTip("An OpenAI-compatible server, e.g. "
                                      "http://127.0.0.1:11434/v1 for Ollama")
        self.key_combo = QComboBox(test_box)
        self.key_combo.setObjectName("testKey")
        self.test_button = QPushButton("Test connection", test_box)
        self.test_button.setObjectName("testButton")
        self.test_button.clicked.connect(lambda: self.test_connection())
        self.test_result = QLabel(test_box)
        self.test_result.setObjectName("testResult")
        self.test_result.setWordWrap(True)
        self.test_result.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.models = QListWidget(test_box)
        self.models.setObjectName("models")
        self.models.setMinimumHeight(100)
        self.models.hide()
        tform.addRow("Base URL", self.base_url_edit)
        tform.addRow("Key", self.key_combo)
        tform.addRow("", self.test_button)
        tform.addRow(self.test_result)
        tform.addRow(self.models)
        right.addWidget(test_box, 1)
        body.addLayout(right, 3)
        layout.addLayout(body, 1)

        self.backend_label = QLabel(self)
        self.backend_label.setObjectName("backendNote")
        self.backend_label.setWordWrap(True)
        self.backend_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.backend_label.setStyleSheet("color: palette(placeholder-text);")
        layout.addWidget(self.backend_label)

        self.buttons = QDialogButtonBox(self)
        self.use_button = None
        if choose:
            self.use_button = self.buttons.addButton("Use", QDialogButtonBox.ButtonRole.AcceptRole)
            self.use_button.setObjectName("useButton")
            self.use_button.setDefault(True)
            self.use_button.setToolTip("Use the selected key; after Test connection, also its "
                                       "server and the model picked in the list")
        close = self.buttons.addButton(QDialogButtonBox.StandardButton.Close)
        close.setAutoDefault(False)
        self.store_button.setAutoDefault(False)
        self.test_button.setAutoDefault(False)
        self.buttons.accepted.connect(self._use_if_choosing)
        self.buttons.rejected.connect(self.reject)
        layout.addWidget(self.buttons)

        self.resize(800, 620)
        self.refresh(select)
        self._update_form()

    # -- the list ---------------------------------------------------------------
    def refresh(self, select: str | None = None) -> None:
        """Read the stored names again; keep (or make) ``select`` current."""
        current = select or self.chosen_name()
        try:
            names = sorted(self.store.list_names(), key=str.casefold)
            note = self.store.backend_note()
        except Exception as exc:  # a broken keyring must not take the designer down
            names, note = [], f"The credential store cannot be read: {exc}"
        self.names.clear()
        for name in names:
            QListWidgetItem(name, self.names)
        if current in names:
            self.names.setCurrentRow(names.index(current))
        elif names and select is None and self.use_button is not None:
            self.names.setCurrentRow(0)
        self.empty_label.setVisible(not names)
        self.backend_label.setText(note)
        keep = self.key_combo.currentText()
        self.key_combo.clear()
        self.key_combo.addItem(NO_KEY, None)
        for name in names:
            self.key_combo.addItem(name, name)
        index = self.key_combo.findText(current or keep)
        self.key_combo.setCurrentIndex(max(0, index))
        self._update_buttons()

    def stored_names(self) -> list[str]:
        return [self.names.item(i).text() for i in range(self.names.count())]

    def chosen_name(self) -> str | None:
        item = self.names.currentItem()
        return item.text() if item is not None else None

    def chosen_model(self) -> str | None:
        item = self.models.currentItem() if not self.models.isHidden() else None
        return item.text() if item is not None and item.isSelected() else None

    def connection(self) -> Connection | None:
        """What Use gives an agent: the selected key; the server a Test
        connection listed models from ("" for OpenAI's own) and the model
        picked in that list, when there was one."""
        name = self.chosen_name()
        if name is None:
            return None
        url = self._tested_url
        if url is not None and url.rstrip("/") == DEFAULT_BASE_URL:
            url = ""  # the provider's own: the agent needs no base URL
        return Connection(name, url, self.chosen_model() if url is not None else None)

    def _on_current(self, current, previous) -> None:
        if current is not None:
            index = self.key_combo.findText(current.text())
            if index >= 0:
                self.key_combo.setCurrentIndex(index)
        self._update_buttons()

    def start_replace(self) -> None:
        """The selected name goes into the form; the secret is typed anew."""
        name = self.chosen_name()
        if name is None:
            return
        self.name_edit.setText(name)
        self.secret_edit.clear()
        self.secret_edit.setFocus()

    def _update_buttons(self) -> None:
        chosen = self.chosen_name() is not None
        self.delete_button.setEnabled(chosen)
        self.replace_button.setEnabled(chosen)
        if self.use_button is not None:
            self.use_button.setEnabled(chosen)

    def _update_form(self) -> None:
        name = self.name_edit.text()
        exists = name in self.stored_names()
        self.store_button.setText("Replace" if exists else "Store")
        self.store_button.setEnabled(bool(name) and bool(self.secret_edit.text()))
        problem = name_problem(name, self.store) if name else None
        self._say(self.form_message, problem or "", error=bool(problem))

    def _say(self, label: QLabel, text: str, *, error: bool = False) -> None:
        t = theme.current()
        label.setText(text)
        label.setStyleSheet(f"color: {t.error if error else t.muted};")

    # -- edits ----------------------------------------------------------------------
    def store_entered(self) -> bool:
        """Store (or replace) the typed name and secret; the secret field is
        emptied either way it ends, so it is never left on screen."""
        name, secret = self.name_edit.text(), self.secret_edit.text()
        problem = name_problem(name, self.store) or (None if secret
                                                     else "Type the secret to store.")
        if problem:
            self._say(self.form_message, problem, error=True)
            return False
        replacing = name in self.stored_names()
        try:
            self.store.set(name, secret)
        except Exception as exc:
            self._say(self.form_message, f"Not stored: {exc}", error=True)
            return False
        finally:
            self.secret_edit.clear()
        self.refresh(name)
        self._say(self.form_message, f"Replaced “{name}”." if replacing else f"Stored “{name}”.")
        return True

    def delete_selected(self, *, confirm: bool = True) -> bool:
        name = self.chosen_name()
        if name is None:
            return False
        if confirm:
            answer = QMessageBox.question(
                self, "Delete credential",
                f"Delete “{name}”? Flows that name it will fail to run until it is stored "
                "again.",
                QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel,
                QMessageBox.StandardButton.Cancel)
            if answer != QMessageBox.StandardButton.Yes:
                return False
        try:
            self.store.delete(name)
        except Exception as exc:
            self._say(self.form_message, f"Not deleted: {exc}", error=True)
            return False
        self.name_edit.clear()
        self.refresh()
        self._say(self.form_message, f"Deleted “{name}”.")
        return True

    def _use_if_choosing(self) -> None:
        if self.use_button is not None and self.chosen_name() is not None:
            self.accept()

    # -- test connection ----------------------------------------------------------
    def test_connection(self) -> int:
        """Ask the server for its models on a worker thread; the answer
        arrives as ``test_finished``. Returns the request's number."""
        base_url = self.base_url_edit.text().strip()
        if not base_url:
            self._say(self.test_result, "Type the server's base URL.", error=True)
            return 0
        name = self.key_combo.currentData()
        self._request += 1
        request = self._request
        self.test_button.setEnabled(False)
        self.test_button.setText("Testing…")
        self._tested_url = None
        self.models.hide()
        self._say(self.test_result, f"Asking {base_url} for its models…")
        store, relay = self.store, self._relay
        self._testing = (base_url, name)

        def work() -> None:
            models, error = [], ""
            try:
                key = store.get(name) if name else None
                if name and not key:
                    raise LookupError(f"“{name}” is not stored any more")
                result = store.list_models(base_url, key)
                if inspect.isawaitable(result):
                    result = asyncio.run(_awaited(result))
                models = [str(m) for m in result]
            except Exception as exc:
                error = str(exc) or type(exc).__name__
            try:
                relay.done.emit(request, models, error)
            except RuntimeError:  # the dialog is gone; nobody is waiting
                pass

        threading.Thread(target=work, name="credentials-test", daemon=True).start()
        return request

    def _on_test_done(self, request: int, models: list, error: str) -> None:
        if request != self._request:
            return  # an older test answered late
        self.test_button.setEnabled(True)
        self.test_button.setText("Test connection")
        self.models.clear()
        if error:
            self._say(self.test_result, f"Failed: {error}", error=True)
        else:
            n = len(models)
            use = (" Pick one: Use gives the agent this key, this base URL and that model."
                   if n and self.use_button is not None else "")
            self._say(self.test_result, f"Connected: {n} model{'s' * (n != 1)}.{use}"
                      if n else "Connected, but the server lists no models.")
            self.models.addItems(models)
            self.models.setVisible(bool(models))
            url, name = self._testing
            self._tested_url = url
            if name and name in self.stored_names():
                # Use takes the key that was tested.
                self.names.setCurrentRow(self.stored_names().index(name))
            wanted = self.models.findItems(self.wanted_model, Qt.MatchFlag.MatchExactly) \
                if self.wanted_model else []
            if wanted:
                self.models.setCurrentItem(wanted[0])
        self.test_finished.emit(list(models), error)

    def done(self, result: int) -> None:  # noqa: D401 - Qt override
        self._request += 1  # a test still running answers nobody
        super().done(result)


async def _awaited(awaitable):
    return await awaitable
